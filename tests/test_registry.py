"""Loading rules: registered names, folders, Hub ids, safetensors only, fresh heads, caching."""

from __future__ import annotations

import shutil

import pytest
import torch

import bertviz_app as bv
from bertviz_app import ModelLoadError, ModelNotFoundError
from bertviz_app.models.registry import FRESH_HEAD_WARNING

from conftest import make_tiny_model


def test_same_model_is_loaded_once(tiny_model_dir):
    a = bv.load_model(str(tiny_model_dir), device="cpu")
    b = bv.load_model(str(tiny_model_dir), device="cpu")
    assert a is b and a.model is b.model


def test_registered_names_resolve_inside_models_dir(models_dir, settings):
    make_tiny_model(models_dir / "runs" / "my-run")
    make_tiny_model(models_dir / "default")
    names = [m["name"] for m in bv.list_models(models_dir)]
    assert names == ["default", "runs/my-run", "encoder"]
    lm = bv.load_model("runs/my-run", device="cpu", settings=settings)
    assert lm.source == "registered" and lm.labels == ("negative", "positive")
    assert bv.load_model("default", device="cpu", settings=settings).source == "registered"
    with pytest.raises(ModelNotFoundError, match="build-default"):  # the default folder holds no model
        bv.load_model("default", device="cpu")


def test_half_written_folders_are_not_listed(models_dir):
    make_tiny_model(models_dir / "runs" / "ok")
    (models_dir / "runs" / ".tmp-ok-1234").mkdir()
    (models_dir / "runs" / "broken").mkdir()  # no config.json
    assert [m["name"] for m in bv.list_models(models_dir)] == ["default", "runs/ok", "encoder"]


def test_missing_default_says_how_to_build(settings):
    with pytest.raises(ModelNotFoundError, match="build-default"):
        bv.load_model("default", device="cpu", settings=settings)


@pytest.mark.parametrize(
    "name", ["runs/../../etc", "runs/nope", "../../etc", "/no/such/folder", "nonsense name!", "", "a/b/c"]
)
def test_bad_names_get_a_message_listing_alternatives(models_dir, settings, name):
    make_tiny_model(models_dir / "default")
    with pytest.raises(ModelNotFoundError) as err:
        bv.load_model(name, device="cpu", settings=settings)
    assert "Traceback" not in str(err.value)
    assert any(word in str(err.value) for word in ("Available", "default", "does not exist", "No model"))


def test_hub_id_offline_fails_at_once_naming_the_cause(settings, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # what HF_HUB_OFFLINE=1 sets when the Hub is imported
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE.*local model"):  # a hang: pytest-timeout
        bv.load_model("google-bert/bert-base-uncased", device="cpu", settings=settings)


def test_pickle_checkpoints_are_refused(tmp_path):
    d = make_tiny_model(tmp_path / "pickled")
    (d / "model.safetensors").unlink()
    torch.save({"x": torch.zeros(1)}, d / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="pickle"):
        bv.load_model(str(d), device="cpu")


def test_plain_encoder_gets_a_fresh_head_and_a_warning(tmp_path):
    lm = bv.load_model(str(make_tiny_model(tmp_path / "enc", with_head=False)), device="cpu")
    assert lm.warnings == (FRESH_HEAD_WARNING,)
    assert "meaningless until you fine-tune" in lm.warnings[0]
    assert len(bv.predict(lm, "good film")[0].probs) == 2


def test_non_bert_models_are_refused(tmp_path):
    d = make_tiny_model(tmp_path / "other")
    cfg = (d / "config.json").read_text().replace('"model_type": "bert"', '"model_type": "gpt2"')
    (d / "config.json").write_text(cfg)
    with pytest.raises(ModelLoadError, match="explains BERT models"):
        bv.load_model(str(d), device="cpu")


def test_device_resolution():
    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert bv.resolve_device("auto").type == expected
    assert bv.resolve_device("cpu").type == "cpu"
    with pytest.raises(ModelLoadError, match="Unknown device"):
        bv.resolve_device("tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(ModelLoadError, match="no CUDA GPU"):
            bv.resolve_device("cuda")


def test_cpu_model_is_fp32_and_attributions_use_it(tiny):
    assert tiny.dtype == torch.float32 and tiny.device_label == "cpu"
    assert tiny.fp32_model() is tiny.model


def test_bf16_inference_keeps_fp32_attributions(tmp_path):
    """The GPU path (bf16 inference, fp32 attributions), exercised on the CPU by forcing the dtype."""
    from bertviz_app.models.registry import load_from_folder

    from conftest import check_against_reference, make_signal_model

    d = make_signal_model(tmp_path / "half")  # trained: attributions of order 0.1, so the check below can fail
    lm = load_from_folder("half", "folder", d, torch.device("cpu"), torch.bfloat16)
    assert lm.device_label == "cpu, bf16"
    p = bv.predict(lm, "good film")[0]
    assert sum(p.probs) == pytest.approx(1.0, abs=1e-3)
    assert lm.fp32_model().bert.embeddings.word_embeddings.weight.dtype == torch.float32
    assert lm.model.bert.embeddings.word_embeddings.weight.dtype == torch.bfloat16
    a = bv.attribute(lm, "good film", n_steps=20)
    # the attributions equal the independent reference on the fp32 copy (the bf16 weights, widened)
    from types import SimpleNamespace

    fp32 = SimpleNamespace(tokenizer=lm.tokenizer, model=lm.fp32_model(), max_length=lm.max_length)
    check_against_reference(fp32, a, "good film", n_steps=20)


def test_atomic_save_never_leaves_a_half_written_model(tmp_path, monkeypatch):
    from transformers import AutoTokenizer, BertForSequenceClassification

    from bertviz_app.train.training import atomic_save

    src = make_tiny_model(tmp_path / "src")
    model = BertForSequenceClassification.from_pretrained(src)
    tok = AutoTokenizer.from_pretrained(src)
    dest = tmp_path / "models" / "runs" / "r1"
    atomic_save(model, tok, dest, {"README.md": "v1"})
    assert (dest / "model.safetensors").is_file() and (dest / "README.md").read_text() == "v1"

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(type(model), "save_pretrained", boom)
    with pytest.raises(OSError):
        atomic_save(model, tok, dest, {"README.md": "v2"})
    assert (dest / "README.md").read_text() == "v1"  # the earlier model is intact
    assert [p.name for p in dest.parent.iterdir()] == ["r1"]  # no temporary folder left behind
    shutil.rmtree(tmp_path / "models")


@pytest.mark.parametrize("name", ["/etc", "../models", "./x", "~/x"])
def test_paths_can_be_turned_off_for_public_deployments(models_dir, settings, name):
    make_tiny_model(models_dir / "default")
    with pytest.raises(ModelNotFoundError, match="BERTVIZ_ALLOW_LOCAL_PATHS=0.*Available models: default"):
        bv.load_model(name, device="cpu", allow_paths=False, settings=settings)
    assert bv.load_model("default", device="cpu", allow_paths=False, settings=settings).source == "registered"


def test_settings_are_read_from_an_environment_only_when_asked(monkeypatch):
    env = {"BERTVIZ_ALLOW_LOCAL_PATHS": "0", "BERTVIZ_MAX_CHARS": "123", "BERTVIZ_MODELS_DIR": "/srv/models",
           "BERTVIZ_MIN_CHANGE": "0.1", "BERTVIZ_PORT": " ", "UNRELATED": "x"}
    s = bv.Settings.from_env(env)
    assert s.allow_local_paths is False and s.max_chars == 123 and s.min_change == pytest.approx(0.1)
    assert str(s.models_dir) == "/srv/models" and s.port == 7860  # blank: the default
    monkeypatch.setenv("BERTVIZ_MAX_CHARS", "77")
    assert bv.Settings().max_chars == 20000  # the defaults never read the environment
    assert bv.Settings.from_env().max_chars == 77  # this process's environment, when asked
    for name, value, message in [("MAX_CHARS", "0", "must be a positive integer"),
                                 ("MAX_CHARS", "many", "must be an integer"),
                                 ("PUBLIC", "maybe", "must be 1 or 0"), ("MIN_CHANGE", "x", "must be a number")]:
        with pytest.raises(ValueError, match=f"BERTVIZ_{name} {message}"):
            bv.Settings.from_env({f"BERTVIZ_{name}": value})


def test_a_model_carries_the_settings_it_was_loaded_with(tiny):
    short = tiny.with_settings(max_chars=1000)
    assert short.model is tiny.model and short.settings.max_chars == 1000 and tiny.settings.max_chars == 20000
    with pytest.raises(bv.InputError, match="limit is 1,000"):
        bv.predict(short, "a" * 1001)
    assert len(bv.predict(tiny, "a " * 600)) == 1  # the original keeps its own limit


def test_allocator_tuning_follows_its_setting(monkeypatch):
    """The served app fixes glibc's mmap threshold (flat RSS under load, bench/load.py); 0 leaves
    malloc alone, a negative value is refused with the variable's name."""
    import sys

    from bertviz_app.serve.allocator import tune_allocator

    assert bv.Settings().mmap_threshold_kb == 2048
    assert tune_allocator(0) is False
    if sys.platform.startswith("linux"):
        import platform

        if platform.libc_ver()[0] == "glibc":
            assert tune_allocator(1024) is True
    with pytest.raises(ValueError, match="BERTVIZ_MMAP_THRESHOLD_KB must be 0 \\(glibc's default\\) or a positive"):
        bv.Settings(mmap_threshold_kb=-5)


def test_ui_model_choices_list_each_model_once(models_dir, settings):
    """The registry lists the shipped encoder now; the fine-tune tab puts it first as its base, and
    the Model dropdown appends it: neither shows it twice."""
    from bertviz_app.ui import build_panel, model_loading

    make_tiny_model(models_dir / "runs" / "r1")
    choices = model_loading.model_choices("default", first=("encoder",), settings=settings)
    assert choices == ["encoder", "default", "runs/r1"]
    assert build_panel.choices("default", settings) == ["default", "runs/r1", "encoder"]
