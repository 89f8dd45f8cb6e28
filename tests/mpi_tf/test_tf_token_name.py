"""TensorFlow's token count request is named ``hvdscale.tokens`` exactly (issue 50): the
timeline finds each step's start by that name, so a changed name loses every step window, and
a mutant wrapping it ("XXhvdscale.tokensXX") had survived as "a label"."""

from __future__ import annotations

from tests.exactness import config, distributed, request_names


def test_the_token_request_is_named_as_the_timeline_finds_it(monkeypatch, hvd,
                                                             comm_world) -> None:
    names = request_names(monkeypatch, hvd, "allreduce")
    distributed(config("tf", "horovod"), comm_world)
    # Traced into the step's graph: named once per trace (at least once), never otherwise.
    assert "hvdscale.tokens" in names, names
    assert all(n == "hvdscale.tokens" for n in names if n and "tokens" in n), names
