"""A shared launch's agreement under torchrun (``agree_on_store``): every rank's word on a real
TCPStore, a rank that never comes timing out, and a malformed entry read as a failure."""

from __future__ import annotations

import datetime
import threading
import time

import torch.distributed as dist

from hvdscale.train.agree import agree_on_store


def _store() -> dist.TCPStore:
    return dist.TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=10),
                         wait_for_workers=False)


def test_every_rank_word_is_gathered() -> None:
    store = _store()
    said = {}

    def rank(r: int, ok: bool, err: str) -> None:
        # A client of its own per rank, as each process has (one client's socket serialises).
        mine = dist.TCPStore("127.0.0.1", store.port, 1, False,
                             timeout=datetime.timedelta(seconds=10))
        said[r] = agree_on_store(dist.PrefixStore("p0", mine), r, 2, ok, err, timeout_s=5)

    t = threading.Thread(target=rank, args=(1, False, "boom"))
    t.start()
    rank(0, True, "")
    t.join()
    assert said[0] == said[1]
    assert said[0].ok == [True, False] and said[0].errors == ["", "boom"]
    assert not said[0].all_ok and not said[0].all_failed


def test_a_rank_that_never_comes_times_out_and_a_malformed_word_is_a_failure() -> None:
    store = _store()
    t0 = time.monotonic()
    a = agree_on_store(dist.PrefixStore("p1", store), 0, 2, True, "", timeout_s=0.5)
    assert a.ok is None and time.monotonic() - t0 < 5
    p = dist.PrefixStore("p2", store)
    p.set("1", "not json")
    a = agree_on_store(p, 0, 2, True, "", timeout_s=2)
    assert a.ok == [True, False] and a.errors[1] == "rank 1: a malformed agreement entry"
    p3 = dist.PrefixStore("p3", store)
    p3.set("1", '[1, "x"]')  # a number where a flag belongs
    assert agree_on_store(p3, 0, 2, True, "", timeout_s=2).ok == [True, False]
