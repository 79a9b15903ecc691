"""Training a tagger above a frozen bottom on features computed once (``train/frozen_features.py``).

The reference for the features is the model's own forward (``output_hidden_states``); the reference for training
on them is the same run through the whole model with the same layers frozen (dropout off, so the frozen layers'
eval mode changes nothing): the weights must come out the same. ALBERT, whose layers share weights, must not take
the shortcut, and the probe that finds what the bottom depends on must see DeBERTa's parts outside its layers."""

from __future__ import annotations

import pytest
import torch
from test_tagger_training import TAGS, _sentences

from bertviz_app.models.forward import hidden_at_depth
from bertviz_app.models.heads import TOKEN_CLASSIFICATION
from bertviz_app.train.frozen_features import FeatureCollator, add_features, bottom_parameters, feature_depth
from bertviz_app.train.tagger_training import tagger_tokenizer, train_tagger
from bertviz_app.train.training import TrainConfig, configure_model, load_for_training

from conftest import FAMILIES, build_family_model

FAST = [f for f in FAMILIES if f != "albert"]  # ALBERT's shared layers never take the shortcut (tested below)


def _tagger(base):
    return load_for_training(TOKEN_CLASSIFICATION, base, num_labels=len(TAGS), ignore_mismatched_sizes=True)


@pytest.mark.parametrize("family", FAMILIES)
def test_hidden_at_depth_is_the_models_own_hidden_state(tmp_path, family):
    base = build_family_model(family, tmp_path / family)
    model = _tagger(base).eval()
    enc = tagger_tokenizer(base)(["the film was good and fun", "bad"], padding=True, return_tensors="pt")
    keep = enc["attention_mask"].bool()  # (B, T): padding compared nowhere
    with torch.no_grad():
        ref = model.base_model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                               output_hidden_states=True).hidden_states
        for depth in range(len(ref)):
            got = hidden_at_depth(model, enc["input_ids"], enc["attention_mask"], depth=depth)[keep]  # (N, D)
            want = ref[depth][keep]
            atol = 1e-5 * float(want.abs().max())
            assert torch.allclose(got, want, rtol=1e-4, atol=atol)
            if depth + 1 < len(ref):  # control: the next depth is told apart at this tolerance, with room
                assert float((got - ref[depth + 1][keep]).abs().max()) > 50 * atol


@pytest.mark.parametrize("family", FAST)
def test_training_on_features_ends_with_the_weights_of_training_through_the_frozen_model(tmp_path, family):
    base = build_family_model(family, tmp_path / family)
    train, val = _sentences(48, seed=1), _sentences(16, seed=2)
    config = TrainConfig(epochs=2, batch_size=8, learning_rate=1e-3, freeze_layers=1, dropout=0.0, warmup_ratio=0.0,
                         logging_steps=2)
    runs = {}
    for budget in (1 << 30, 0):  # 0 bytes: no room for features, so the run goes through the whole model
        model, _, info = train_tagger(base, TAGS, train, val, config, feature_budget=budget)
        runs[budget] = ({k: v.detach().clone() for k, v in model.state_dict().items()}, info)
    (fast, fast_info), (full, full_info) = runs[1 << 30], runs[0]
    assert fast_info["frozen_features"]["depth"] == 1 and "computed once" in fast_info["frozen_features"]["why"]
    assert full_info["frozen_features"]["depth"] == 0 and "MiB allowed" in full_info["frozen_features"]["why"]
    losses = [[h["loss"] for h in i["log_history"] if "loss" in h] for i in (fast_info, full_info)]
    assert len(losses[0]) == len(losses[1]) >= 3 and losses[0] == pytest.approx(losses[1], rel=1e-3)
    start = {k: v for k, v in _tagger(base).state_dict().items()}
    moved = 0
    for name, want in full.items():
        if not want.dtype.is_floating_point:
            continue
        # the scale floor is the initialisation's std (0.02): a key's bias gets no gradient (softmax ignores it) and
        # only drifts by float noise of order 1e-8 on either side
        scale = max(float(want.abs().max()), 0.02)
        assert torch.allclose(fast[name], want, rtol=1e-3, atol=1e-4 * scale), name
        if not name.startswith("classifier."):
            moved += not torch.allclose(want, start[name], rtol=1e-3, atol=1e-3 * scale)
    assert moved > 0  # control: the layer above the frozen one trained, so the comparison had something to compare


def test_what_the_bottom_depends_on_must_be_frozen_for_the_shortcut(tmp_path):
    deberta = _tagger(build_family_model("deberta-v2", tmp_path / "deberta"))
    names = {n for n, _ in bottom_parameters(deberta, 1, [1, 5, 6, 2])}
    assert any(".encoder.conv." in n for n in names) and any(".encoder.LayerNorm." in n for n in names)
    assert not any(".layer.1." in n for n in names) and any(".layer.0." in n for n in names)
    configure_model(deberta, TrainConfig(freeze_layers=1))  # freezes them with layer 0 and the embeddings
    assert all(not p.requires_grad for _, p in bottom_parameters(deberta, 1, [1, 5, 6, 2]))
    assert any(p.requires_grad for p in deberta.parameters())  # the layer above still trains
    depth, why = feature_depth(deberta, 1, 1000, [1, 5, 6, 2])
    assert depth == 1, why

    albert = _tagger(build_family_model("albert", tmp_path / "albert"))
    configure_model(albert, TrainConfig(freeze_layers=1))
    depth, why = feature_depth(albert, 1, 1000, [1, 5, 6, 2])
    assert depth == 0 and "share one set of weights" in why and "albert.encoder" in why
    assert all(p.requires_grad is False for p in albert.albert.embeddings.parameters())

    bert = _tagger(build_family_model("bert", tmp_path / "bert"))
    configure_model(bert, TrainConfig(freeze_layers=1))
    assert feature_depth(bert, 1, 1000, [1, 5, 6, 2])[0] == 1  # control for each refusal below
    assert feature_depth(bert, 0, 1000, [1, 5, 6, 2]) == (0, "no frozen layers")
    depth, why = feature_depth(bert, 1, 1000, [1, 5, 6, 2], world_size=2)
    assert depth == 0 and "2 processes" in why
    width = bert.config.hidden_size
    assert feature_depth(bert, 1, 1000, [1, 5, 6, 2], budget=1000 * width * 4)[0] == 1
    depth, why = feature_depth(bert, 1, 1001, [1, 5, 6, 2], budget=1000 * width * 4)
    assert depth == 0 and "more than" in why


def test_features_keep_each_sentence_whole_and_batches_pad_them(tmp_path):
    base = build_family_model("bert", tmp_path / "bert")
    model = _tagger(base).train()
    tok = tagger_tokenizer(base)
    rows = [{"input_ids": tok("the film was good and fun")["input_ids"], "labels": None},
            {"input_ids": tok("bad")["input_ids"], "labels": None}]
    rows = [dict(r, labels=[0] * len(r["input_ids"])) for r in rows]
    rows[0]["labels"][1] = 3
    out = add_features(model, tok, rows, depth=1)
    assert model.training  # the mode is restored
    assert "hidden" not in rows[0]  # the caller's rows are left as they were
    for r in out:
        with torch.no_grad():
            alone = hidden_at_depth(model.eval(), torch.tensor([r["input_ids"]]), None, depth=1)[0]  # (T, D)
        assert r["hidden"].shape == alone.shape
        assert torch.allclose(r["hidden"], alone, rtol=1e-4, atol=1e-5 * float(alone.abs().max()))
    batch = FeatureCollator(-100)(out)
    n0, n1 = len(rows[0]["input_ids"]), len(rows[1]["input_ids"])
    assert batch["hidden"].shape == (2, n0, model.config.hidden_size) and set(batch) == {"hidden", "attention_mask",
                                                                                         "labels"}
    assert batch["attention_mask"].tolist() == [[1] * n0, [1] * n1 + [0] * (n0 - n1)]
    assert batch["labels"][0, 1] == 3 and batch["labels"][1, n1:].eq(-100).all() and batch["labels"][1, :n1].eq(0).all()
    assert batch["hidden"][1, n1:].eq(0).all() and torch.equal(batch["hidden"][1, :n1], out[1]["hidden"])


def test_finetune_command_freezes_the_bottom_and_says_how_it_trained(tmp_path, monkeypatch, capsys):
    import json

    from safetensors.torch import load_file
    from test_tagger_training import _conll

    from bertviz_app.cli import main

    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(tmp_path / "models"))
    base = build_family_model("bert", tmp_path / "base")
    data = tmp_path / "train.conll"
    data.write_text(_conll(_sentences(120, seed=3)), encoding="utf-8")
    args = ["finetune", str(data), "--task", "token-classification", "--base", str(base), "--epochs", "12", "--lr",
            "1e-2", "--batch-size", "16", "--json"]
    code = main([*args, "--name", "ner", "--freeze-layers", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(out)
    assert res["metrics"]["entity_f1"] > 0.8 and res["verdict"]["learned"], res  # the layer above learns the task
    assert "note: The embeddings and layers 0-0 were frozen; their output was computed once per text" in err
    run = tmp_path / "models" / "runs" / "ner"
    assert json.loads((run / "run.json").read_text())["hyperparameters"]["freeze_layers"] == 1
    tuned = load_file(run / "model.safetensors")
    start = _tagger(base).state_dict()
    frozen = [k for k in tuned if ".embeddings." in k or ".layer.0." in k]
    above = [k for k in tuned if ".layer.1." in k]
    assert frozen and above
    assert all(torch.equal(tuned[k], start[k]) for k in frozen)  # kept exactly as the base has them
    assert sum(not torch.allclose(tuned[k], start[k]) for k in above) >= len(above) // 2  # control: the rest trained

    for bad, says in (("2", "from 0 to 1 (the base has 2 layers; the top one has to train), got 2"),
                      ("-1", "got -1")):
        code = main([*args, "--name", f"bad{bad}", "--freeze-layers", bad])
        out, err = capsys.readouterr()
        assert code != 0 and says in err and "Traceback" not in err, err
        assert not (tmp_path / "models" / "runs" / f"bad{bad}").exists()


@pytest.mark.parametrize("family,pair,multi", [("bert", False, False), ("bert", True, False),
                                               ("deberta-v2", False, False), ("electra", False, True)])
def test_a_classifier_on_features_ends_with_the_weights_of_training_through_the_frozen_model(tmp_path, family, pair,
                                                                                             multi):
    """The same reference for a sequence classifier: single-label, with a second text (token types), multi-label."""
    from bertviz_app.train.training import train_classifier

    from conftest import toy_sentiment_rows

    base = build_family_model(family, tmp_path / family)
    texts, targets = toy_sentiment_rows(64, seed=1)
    labels = [[float(t[0] > 0.9), float(t[1] > 0.9)] for t in targets] if multi else [int(t[1] > 0.5) for t in targets]
    pairs = [f"it was {w}" for w in ("fine", "so so") * 32] if pair else None
    config = TrainConfig(epochs=2, batch_size=8, learning_rate=1e-3, freeze_layers=1, dropout=0.0, warmup_ratio=0.0,
                         logging_steps=2, max_length=32)
    runs = {}
    for budget in (1 << 30, 0):
        model, _, info = train_classifier(base, ["negative", "positive"], texts[:48], labels[:48], texts[48:],
                                          labels[48:], train_pairs=pairs and pairs[:48], val_pairs=pairs and pairs[48:],
                                          config=config, multi_label=multi, feature_budget=budget)
        runs[budget] = ({k: v.detach().clone() for k, v in model.state_dict().items()}, info)
    (fast, fast_info), (full, full_info) = runs[1 << 30], runs[0]
    assert fast_info["frozen_features"]["depth"] == 1 and full_info["frozen_features"]["depth"] == 0
    losses = [[h["loss"] for h in i["log_history"] if "loss" in h] for i in (fast_info, full_info)]
    assert len(losses[0]) == len(losses[1]) >= 3 and losses[0] == pytest.approx(losses[1], rel=1e-3)
    evals = [[h["eval_loss"] for h in i["log_history"] if "eval_loss" in h] for i in (fast_info, full_info)]
    assert evals[0] and evals[0] == pytest.approx(evals[1], rel=1e-3)  # validation read from the features too
    for name, want in full.items():
        if want.dtype.is_floating_point:
            scale = max(float(want.abs().max()), 0.02)
            assert torch.allclose(fast[name], want, rtol=1e-3, atol=1e-4 * scale), name


def test_the_classifier_finetune_command_says_how_its_frozen_layers_trained(tmp_path, monkeypatch, capsys):
    import json

    from test_finetune_ui import write_csv

    from bertviz_app.cli import main

    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(tmp_path / "models"))
    base = build_family_model("bert", tmp_path / "base")
    data = write_csv(tmp_path / "reviews.csv", n=40)
    args = ["finetune", str(data), "--base", str(base), "--mode", "full", "--epochs", "1", "--batch-size", "8"]
    assert main([*args, "--name", "cls-frozen", "--freeze-layers", "1"]) == 0
    said = "".join(capsys.readouterr())  # the lines go to stdout, or to stderr beside --json
    assert "note: The embeddings and layers 0-0 were frozen; their output was computed once per text" in said
    run = json.loads((tmp_path / "models" / "runs" / "cls-frozen" / "run.json").read_text())
    assert run["hyperparameters"]["freeze_layers"] == 1 and any("were frozen" in n for n in run["notices"])
    assert main([*args, "--name", "cls-all"]) == 0  # control: nothing frozen, nothing said of it
    said = "".join(capsys.readouterr())
    assert "saved runs/cls-all" in said and "were frozen" not in said
