"""Evaluation: the loss of the held-out set as one process computes it, unchanged weights,
the same loss from both frameworks on the same weights, and text's held-out split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hvdscale.config import load_config
from hvdscale.corpora.corpus import concat_batches, load_text
from hvdscale.corpora.evalset import make_eval_set
from hvdscale.errors import HvdscaleError
from hvdscale.train.evaluate import eval_loss_sum
from tests.exactness import adapter, config


def test_eval_loss_is_the_whole_sets_loss_and_leaves_the_weights() -> None:
    pytest.importorskip("torch")
    cfg = config("torch", "horovod", "model.kind=lm", "data.synthetic.kind=markov")
    ev = make_eval_set(cfg.data, "lm", 50, 50, 16)
    a = adapter(cfg)
    before = a.params_buffer().copy()
    total = eval_loss_sum(a, ev)
    assert eval_loss_sum(a, ev) == total  # fixed order: bit-identical every time
    assert np.array_equal(a.params_buffer(), before)
    whole = a.loss(concat_batches(ev.batches))  # one batch of the whole set
    assert abs(total - whole) / whole < 1e-5
    assert ev.tokens == sum(b.loss_tokens for b in ev.batches)


def test_both_frameworks_give_the_same_loss_for_the_same_weights() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    ct = config("torch", "horovod", "data.synthetic.kind=mapped")
    ev = make_eval_set(ct.data, "nmt", 50, 60, 16)
    a, b = adapter(ct), adapter(config("tf", "horovod", "data.synthetic.kind=mapped"))
    b.params_buffer()[:] = a.params_buffer()
    b.params_changed()
    la, lb = eval_loss_sum(a, ev), eval_loss_sum(b, ev)
    assert abs(la - lb) / la < 1e-5, (la, lb)  # float32 kernels of two libraries
    # Negative control: different weights (TensorFlow's own initialisation) differ far more.
    assert abs(eval_loss_sum(adapter(config("tf", "horovod")), ev) - la) / la > 1e-3


def test_text_eval_fraction_is_held_out(tmp_path: Path) -> None:
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("".join(f"w{i} a b\n" for i in range(40)))
    tgt.write_text("".join(f"x{i} c\n" for i in range(40)))
    cfg = load_config(None, ["data.source=text", f"data.text.src={src}",
                             f"data.text.tgt={tgt}", "data.text.eval_fraction=0.1",
                             "model.src_vocab=0", "model.tgt_vocab=0"])
    train = load_text(cfg.data.text, "nmt", 0, 1)
    ev = make_eval_set(cfg.data, "nmt", 0, 0, 8)
    assert len(train.src) == 36 and ev.sentences == 4 and ev.floor_loss is None
    held = {int(b.src[i, 0]) for b in ev.batches for i in range(b.sentences)}
    assert held.isdisjoint({int(s[0]) for s in train.src})  # no held-out line is trained on
    with pytest.raises(HvdscaleError, match=r"data\.text\.eval_fraction"):
        make_eval_set(load_config(None, ["data.source=text", f"data.text.src={src}",
                                         f"data.text.tgt={tgt}"]).data, "nmt", 0, 0, 8)
