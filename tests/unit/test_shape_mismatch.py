"""The custom-model check that every rank built the same parameters (issue 39): a rank with more
or fewer parameters than rank 0 is named, however its shared ones agree."""

from __future__ import annotations

from hvdscale.models.custom import shape_mismatch

BASE = [("emb", (50, 8)), ("rnn.w", (8, 32)), ("out", (32, 50))]


def test_the_same_list_agrees() -> None:
    assert shape_mismatch(BASE, list(BASE)) is None
    assert shape_mismatch([], []) is None


def test_a_different_count_of_parameters_is_named() -> None:
    more = [*BASE, ("extra.b", (50,))]
    assert shape_mismatch(more, BASE) == "4 parameters against 3"
    assert shape_mismatch(BASE, more) == "3 parameters against 4"
    assert shape_mismatch(BASE[:1], BASE) == "1 parameters against 3"


def test_the_first_different_name_or_shape_is_named() -> None:
    renamed = [BASE[0], ("rnn.u", (8, 32)), BASE[2]]
    assert shape_mismatch(renamed, BASE) == "parameter 1: rnn.u [8, 32] against rnn.w [8, 32]"
    wider = [BASE[0], BASE[1], ("out", (32, 51))]
    assert shape_mismatch(wider, BASE) == "parameter 2: out [32, 51] against out [32, 50]"
    # Lists (as an allgather returns them) compare equal to tuples.
    assert shape_mismatch([(n, list(s)) for n, s in BASE], BASE) is None
