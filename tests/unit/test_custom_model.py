"""A user's own model (model.kind: custom): the config's builder fields, the identity that
keeps different and changed models apart, and each refusal of a broken contract (one line,
before training), for PyTorch and TensorFlow."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from hvdscale.config import load_config, to_dict
from hvdscale.errors import ConfigError, HvdscaleError
from hvdscale.frameworks import load_framework
from hvdscale.records.experiment import experiment_id, identity

ROOT = Path(__file__).resolve().parents[2]
BUILDERS = ROOT / "tests" / "data" / "custom_models"
GRU_LM = ROOT / "examples" / "torch_gru_lm" / "config.yaml"
SMALL = ["model.embed_dim=8", "model.hidden_size=8", "model.src_vocab=30", "model.tgt_vocab=30"]


def _custom(framework: str, builder: str, *extra: str, task: str = "lm"):
    return load_config(None, [f"framework={framework}", "model.kind=custom", f"model.task={task}",
                              f"model.builder={builder}", f"model.builder_path={BUILDERS}",
                              *SMALL, *extra])


def _adapter(cfg):
    m = cfg.model
    return load_framework(cfg.framework).make_adapter(m, cfg.optim, m.src_vocab, m.tgt_vocab)


@pytest.mark.parametrize("overrides,message", [
    (["model.kind=custom"], "model.task must be 'nmt' or 'lm' with model.kind=custom"),
    (["model.kind=custom", "model.task=lm"], "model.builder must name the function"),
    (["model.kind=custom", "model.task=lm", "model.builder=gru_lm"],
     "model.builder must be 'PACKAGE.MODULE:FUNCTION'"),
    (["model.builder=gru_lm:build"], "model.builder needs model.kind=custom"),
    (["model.task=lm"], "model.task must be unset or 'nmt' for model.kind=nmt"),
    (["model.kind=custom", "model.task=lm", "model.builder=hvdscale_nowhere.mod:build"],
     "No module named 'hvdscale_nowhere.mod'"),
])
def test_config_refuses_incomplete_custom_models(overrides, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


def test_builder_is_found_next_to_its_config_and_hashed(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # another working directory: the config's own dir is searched
    cfg = load_config(str(GRU_LM))
    assert cfg.model.builder_path == str(GRU_LM.parent)
    source = (GRU_LM.parent / "gru_lm.py").read_bytes()
    assert cfg.model.builder_sha256 == hashlib.sha256(source).hexdigest()
    assert cfg.model.data_kind == "lm"


def test_two_models_and_a_changed_model_are_different_experiments(tmp_path) -> None:
    gru = to_dict(load_config(str(GRU_LM)))
    other = to_dict(load_config(str(GRU_LM), ["model.builder=transformer_nmt:build",
                                              f"model.builder_path={ROOT / 'examples'}"
                                              "/torch_transformer_nmt", "model.task=nmt"]))
    assert experiment_id(gru) != experiment_id(other)
    # The same module elsewhere: the same experiment (where it was found is no part of it).
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(GRU_LM.parent / "gru_lm.py", moved / "gru_lm.py")
    shutil.copy(GRU_LM, moved / "config.yaml")
    same = to_dict(load_config(str(moved / "config.yaml")))
    assert same["model"]["builder_path"] != gru["model"]["builder_path"]
    assert experiment_id(same) == experiment_id(gru) and identity(same) == identity(gru)
    # One changed line in the model: a new experiment.
    with open(moved / "gru_lm.py", "a") as f:
        f.write("\n# tuned\n")
    changed = to_dict(load_config(str(moved / "config.yaml")))
    assert experiment_id(changed) != experiment_id(gru)


def test_shipped_models_keep_their_identity() -> None:
    # Records written before the custom-model fields existed have none of them.
    now = to_dict(load_config(None, ["model.kind=lm"]))
    before = {**now, "model": {k: v for k, v in now["model"].items()
                               if k not in ("task", "builder", "builder_path", "builder_sha256")}}
    assert experiment_id(now) == experiment_id(before)


TORCH_REFUSALS = [
    ("broken_import:build", (), "cannot be imported: ModuleNotFoundError: No module named "
                                "'hvdscale_no_such_package'"),
    ("custom_torch:nowhere", (), "has no function 'nowhere'"),
    ("custom_torch:not_module", (), "returned dict, not a torch.nn.Module"),
    ("custom_torch:matrix_loss", (), "loss must be a float scalar tensor.*shape \\[2, 2\\]"),
    ("custom_torch:float_count", (), "token count must be an integer scalar"),
    ("custom_torch:frozen", (), "no trainable parameters"),
    ("custom_torch:raises", (), "raised ValueError: hidden_size too small.*custom_torch.py:"),
    ("bad_embeddings:build", (), "EMBEDDINGS names 'encoder.embedding.weight', which is not"),
    ("custom_torch:good", ("model.rnn_impl=loop",), "declares RNN_IMPLS=\\('fused',\\)"),
]


@pytest.mark.parametrize("builder,extra,message", TORCH_REFUSALS,
                         ids=[b for b, _, _ in TORCH_REFUSALS])
def test_torch_contract_refusals(builder, extra, message) -> None:
    with pytest.raises(HvdscaleError, match=message) as e:
        _adapter(_custom("torch", builder, *extra))
    assert "\n" not in str(e.value)


TF_REFUSALS = [
    ("custom_tf:not_module", "returned list, not a tf.Module"),
    ("custom_tf:matrix_loss", "loss must be a float scalar tensor.*shape \\[2, 2\\]"),
    ("custom_tf:float_count", "token count must be an integer scalar.*float32"),
    ("custom_tf:frozen", "no trainable variables"),
]


@pytest.mark.parametrize("builder,message", TF_REFUSALS, ids=[b for b, _ in TF_REFUSALS])
def test_tf_contract_refusals(builder, message) -> None:
    with pytest.raises(HvdscaleError, match=message) as e:
        _adapter(_custom("tf", builder))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_a_good_custom_model_trains_and_declares_its_tables(framework) -> None:
    cfg = _custom(framework, f"custom_{framework}:good")
    a = _adapter(cfg)
    # predict's bytes come from the model's own parameters, through the same builder.
    sizes = load_framework(framework).tensor_sizes(cfg.model, 30, 30)
    assert sizes == a.tensor_sizes() and sum(n for _, n in sizes) == a.num_params
    from hvdscale.study.predict.inputs import gradient_bytes
    from hvdscale.study.predict.sparse_bytes import embedding_inputs

    assert sum(gradient_bytes(cfg)) == 4 * a.num_params
    assert embedding_inputs(cfg) == {"embed" if framework == "tf" else "embed.weight": "src"}
    assert [(t.name, t.rows, t.dim) for t in a.embedding_tables()] == [("embed", 30, 8)] \
        if framework == "tf" else [("embed.weight", 30, 8)]
    from hvdscale.corpora.corpus import probe_batch

    batch = probe_batch("lm")
    before = a.params_buffer().copy()
    a.train_step(batch, 1.0 / batch.loss_tokens)
    assert (a.params_buffer() != before).any()
