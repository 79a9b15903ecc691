"""Shared fixtures: a tiny BERT classifier built from scratch and saved with save_pretrained,
so the loading path the app uses is the real one. No downloads, runs in a second."""

from __future__ import annotations

import os
import shutil
import signal as signals
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

# A 30-odd word WordPiece vocabulary: enough for the sentences the tests use.
VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "a", "the", "film", "movie", "good", "bad", "great", "awful", "is", "was", "not",
    "gorgeous", "moving", "tedious", "slog", "joy", "##less", "##ing", "fun", "it", ",", ".", "!",
    "'", "t", "don", "<", ">", "img", "src", "=", "x",
]


def make_tiny_model(path: Path, num_labels: int = 2, multi_label: bool = False, with_head: bool = True,
                    seed: int = 0) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    # transformers 5: `vocab=`; `vocab_file=` is silently ignored
    tokenizer = BertTokenizerFast(vocab=str(path / "vocab.txt"), do_lower_case=True, model_max_length=64)
    labels = ["negative", "positive"] if num_labels == 2 else [f"class_{i}" for i in range(num_labels)]
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=num_labels,
        id2label=dict(enumerate(labels)),
        label2id={lab: i for i, lab in enumerate(labels)},
        problem_type="multi_label_classification" if multi_label else "single_label_classification",
    )
    torch.manual_seed(seed)
    model = BertForSequenceClassification(config) if with_head else BertModel(config)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def make_sentiment_model(path: Path) -> Path:
    """The tiny BERT trained for half a second to read one sentiment word per sentence (good, great,
    fun: positive; bad, awful, tedious: negative): a model whose evidence is known."""
    import random

    import torch
    from transformers import BertForSequenceClassification, BertTokenizerFast

    make_tiny_model(path)
    tok = BertTokenizerFast.from_pretrained(path)
    model = BertForSequenceClassification.from_pretrained(path)
    rng = random.Random(0)
    pos, neg = ["good", "great", "fun"], ["bad", "awful", "tedious"]
    filler = ["the", "film", "movie", "was", "is", "a", "it"]
    texts, labels = [], []
    for _ in range(128):
        y = rng.random() < 0.5
        words = rng.choices(filler, k=rng.randint(2, 5))
        words.insert(rng.randint(0, len(words)), rng.choice(pos if y else neg))
        texts.append(" ".join(words))
        labels.append(int(y))
    enc = tok(texts, padding=True, return_tensors="pt")
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(25):
        loss = model(**enc, labels=torch.tensor(labels)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(path, safe_serialization=True)
    return path


def make_overconfident_copy(src: Path, dest: Path, factor: float = 1000.0) -> Path:
    """A copy of the model folder ``src`` whose classifier's logits are ``factor`` times larger: the same
    answers, near-certain about each, so on labels it gets half wrong temperature scaling clearly helps."""
    import shutil

    import torch
    from transformers import AutoModelForSequenceClassification

    shutil.copytree(src, dest)
    model = AutoModelForSequenceClassification.from_pretrained(dest)
    with torch.no_grad():
        model.classifier.weight.mul_(factor)
        model.classifier.bias.mul_(factor)
    model.save_pretrained(dest, safe_serialization=True)
    return dest


WORDS = ["a", "the", "film", "movie", "good", "bad", "great", "awful", "is", "was", "not", "gorgeous", "moving",
         "tedious", "slog", "joy", "less", "fun", "it", ",", ".", "!"]
LABELS = ["negative", "positive"]
SMALL = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
             max_position_embeddings=64)


def _wordpiece(cls, path):
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return cls(vocab=str(path / "vocab.txt"), do_lower_case=True, model_max_length=64)


def _bpe(path):
    """A byte-level BPE (RoBERTa): every word of WORDS is one merged "Ġword" token."""
    from transformers import RobertaTokenizer

    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
    for c in sorted({c for w in WORDS for c in w} | {"Ġ"}):
        vocab.setdefault(c, len(vocab))
    merges = []
    for w in WORDS:
        cur = "Ġ"
        for ch in w:
            merges.append((cur, ch))
            cur += ch
            vocab.setdefault(cur, len(vocab))
    return RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=64)


def _unigram(cls, specials):
    """A Unigram (SentencePiece-style) vocabulary: "▁word" pieces, single characters as fallback."""
    pieces = [(s, 0.0) for s in specials] + [("▁" + w, -1.0) for w in WORDS] + [("▁", -3.0)]
    pieces += [(c, -5.0) for c in sorted({c for w in WORDS for c in w})]
    return cls(vocab=pieces, model_max_length=64)


def build_family_model(family: str, path):
    """A tiny random classifier of ``family`` saved in ``path`` (with its tokenizer); returns ``path``."""
    import torch
    import transformers as tf

    path.mkdir(parents=True, exist_ok=True)
    labels = dict(num_labels=2, id2label=dict(enumerate(LABELS)), label2id={lab: i for i, lab in enumerate(LABELS)})
    if family == "bert":
        tok = _wordpiece(tf.BertTokenizer, path)
        cfg = tf.BertConfig(vocab_size=len(tok), **SMALL, **labels)
    elif family == "distilbert":
        tok = _wordpiece(tf.DistilBertTokenizer, path)
        cfg = tf.DistilBertConfig(vocab_size=len(tok), dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                  max_position_embeddings=64, **labels)
    elif family == "electra":
        tok = _wordpiece(tf.ElectraTokenizer, path)
        cfg = tf.ElectraConfig(vocab_size=len(tok), embedding_size=8, **SMALL, **labels)  # projected 8 -> 16
    elif family == "roberta":
        tok = _bpe(path)
        cfg = tf.RobertaConfig(vocab_size=len(tok), pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1,
                               **{**SMALL, "max_position_embeddings": 66}, **labels)  # positions start after pad
    elif family == "xlm-roberta":
        tok = _unigram(tf.XLMRobertaTokenizer, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
        cfg = tf.XLMRobertaConfig(vocab_size=len(tok), pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                  type_vocab_size=1, **{**SMALL, "max_position_embeddings": 66}, **labels)
    elif family == "albert":
        tok = _unigram(tf.AlbertTokenizer, ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"])
        cfg = tf.AlbertConfig(vocab_size=len(tok), embedding_size=8, pad_token_id=0, **SMALL, **labels)
    elif family == "deberta-v2":
        tok = _unigram(tf.DebertaV2Tokenizer, ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        cfg = tf.DebertaV2Config(vocab_size=len(tok), pad_token_id=0, relative_attention=True, position_buckets=8,
                                 max_relative_positions=64, pos_att_type=["p2c", "c2p"], position_biased_input=False,
                                 conv_kernel_size=3, norm_rel_ebd="layer_norm", type_vocab_size=0, **SMALL, **labels)
    else:
        raise ValueError(family)
    torch.manual_seed(0)
    model = tf.AutoModelForSequenceClassification.from_config(cfg)
    # A random head leaves the two classes within 2e-5 of each other on some families (ALBERT): which one is
    # "predicted" would be float rounding, which differs between CPUs and between the fused and eager kernels
    # that predict and attribute use. A bias of 0.4 on the last layer makes "positive" lead by about 0.1.
    head = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == len(LABELS)][-1]
    with torch.no_grad():
        head.bias.copy_(torch.tensor([0.0, 0.4]))
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


FAMILIES = ["bert", "distilbert", "roberta", "xlm-roberta", "albert", "electra", "deberta-v2"]


# --- fixture models with signal (issue 37) ----------------------------------------------------------
# A random tiny model answers every sentence with p(positive) within 1e-5 of 0.499 and Integrated
# Gradients scores of 1e-6: a test comparing those with a tolerance of 1e-5 cannot fail. These models
# are each family's tiny classifier trained for 60 Adam steps on a toy task: one sentiment word decides
# a sentence; sentences without one, and sentences made of one baseline token ([PAD], [MASK], [UNK])
# are neutral (target 0.5), so every baseline sits near p = 0.5, a sentiment word moves p to 0.02 or
# 0.98 (targets 0.02/0.98: not saturated, so the paths stay smooth enough for 20-50 quadrature points)
# and Integrated Gradients scores are of order 0.1-0.6. The [PAD] word vector (zero in a new
# model, padding_idx keeps it there) gets a fixed random value, as in a real checkpoint, so the "pad"
# and "zero" baselines differ; DeBERTa-v2 keeps its zero [PAD] row (baseline_jumps is about that).
# tests/test_fixture_signal.py checks the spread, so the fixtures cannot quietly lose it.
PAD_SCALE = 0.5  # the [PAD] row: 0.5 x a standard normal vector (seed 1)
SIGNAL_POSITIVE = ("good", "great", "fun", "gorgeous", "moving", "joy")
SIGNAL_NEGATIVE = ("bad", "awful", "tedious", "slog")
SIGNAL_FILLER = ("the", "film", "movie", "was", "is", "a", "it")
SIGNAL_TEXTS = ("the film was awful", "a gorgeous, moving film!", "it is good", "bad", "the movie was tedious",
                "it was fun", "the film")


def toy_sentiment_rows(n: int = 64, seed: int = 0) -> tuple[list[str], list[list[float]]]:
    """``n`` short sentences and their target distributions (negative, positive): three in four hold one
    sentiment word (its class, 0.98); the rest are filler words only (0.5, 0.5)."""
    import random

    rng = random.Random(seed)
    texts, targets = [], []
    for i in range(n):
        words = rng.choices(SIGNAL_FILLER, k=rng.randint(1, 5))
        if i % 4 < 3:
            positive = rng.random() < 0.5
            words.insert(rng.randint(0, len(words)), rng.choice(SIGNAL_POSITIVE if positive else SIGNAL_NEGATIVE))
            targets.append([0.02, 0.98] if positive else [0.98, 0.02])
        else:
            targets.append([0.5, 0.5])
        texts.append(" ".join(words))
    return texts, targets


def train_signal(path: Path, steps: int = 60, lr: float = 1e-2) -> Path:
    """The classifier saved in ``path`` (any supported family, with its tokenizer) trained on
    ``toy_sentiment_rows`` and saved back: see the comment above. One thread (several only add overhead
    at this size: 0.5 s of CPU a family), fixed seeds: the same weights on every run of one machine.
    Another CPU's kernels round differently: training with 2 threads instead of 1 moves the golden
    logits (test_core) by 6e-6, perturbing every initial weight by 1e-6 (relative) by 1e-4; the golden
    tolerance is 1e-3."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path)
    words = model.get_input_embeddings()
    texts, targets = toy_sentiment_rows()
    enc = tok(texts, padding=True, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"].bool()
    special = torch.tensor([tok.get_special_tokens_mask(r, already_has_special_tokens=True) for r in ids.tolist()],
                           dtype=torch.bool)
    fillers = [tok.pad_token_id, tok.mask_token_id, tok.unk_token_id]
    for i in range(7, len(texts), 8):  # a neutral row of one baseline token: the baselines say nothing
        ids[i, ~special[i] & mask[i]] = fillers[(i // 8) % 3]
    inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    if model.config.model_type in ("distilbert", "roberta", "xlm-roberta"):
        inputs.pop("token_type_ids", None)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # several threads only add overhead at this size, and change the rounding
    try:
        gen = torch.Generator().manual_seed(1)
        if model.config.model_type != "deberta-v2":
            with torch.no_grad():
                words.weight[tok.pad_token_id] = PAD_SCALE * torch.randn(words.weight.shape[1], generator=gen)
        torch.manual_seed(0)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        y = torch.tensor(targets)
        for _ in range(steps):
            loss = F.cross_entropy(model(**inputs).logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(path, safe_serialization=True)
    return path


def make_signal_model(path: Path, family: str = "bert") -> Path:
    """``family``'s tiny classifier (``build_family_model``) trained by ``train_signal``, in ``path``."""
    return train_signal(build_family_model(family, path))


@pytest.fixture(scope="session")
def signal_model_dir(tmp_path_factory):
    """``signal_model_dir(family)``: the folder of ``family``'s signal model (``make_signal_model``),
    built on first use (about half a second) and kept for the session."""
    built: dict[str, Path] = {}

    def get(family: str = "bert") -> Path:
        if family not in built:
            built[family] = make_signal_model(tmp_path_factory.mktemp("signal") / family, family)
        return built[family]

    return get


@pytest.fixture(scope="session")
def signal(signal_model_dir):
    """The trained tiny BERT (``make_signal_model``) loaded as the app loads it, for the session."""
    from bertviz_app import load_model
    from bertviz_app.config import Settings

    lm = load_model(str(signal_model_dir("bert")), device="cpu", settings=Settings(memo_size=0))
    _SESSION_MODELS.append(lm)
    return lm


def reference_f(lm, text: str, pair: str | None = None, baseline: str | None = None, output: str = "prob"):
    """Class outputs (C,) of ``text`` (or of its ``baseline``: every non-special token replaced by that
    token, or zero word vectors for "zero") by the model's own forward from word vectors: a forward pass
    of its own, independent of the app's engine. float64 numpy."""
    import torch

    with torch.no_grad():
        x, b, kw = _reference_inputs(lm, text, pair, baseline or "pad")
        return _reference_out(lm, x if baseline is None else b, kw, output)[0].double().numpy()


def reference_ig(lm, text: str, pair: str | None = None, baseline: str = "pad", output: str = "prob",
                 target: int | None = None, steps: int = 1024, gauss_legendre: int | None = None):
    """Integrated Gradients of ``text`` computed independently of the app: the straight path from the
    baseline's word vectors to the text's through the model's own forward (``inputs_embeds``, eager,
    every layer), plain ``torch.autograd``; by default a midpoint Riemann sum of ``steps`` points
    (error of order 1/steps^2: the integral itself); ``gauss_legendre=n``: numpy's n-point
    Gauss-Legendre rule instead (what ``attribute(n_steps=n)`` and Captum compute: the same sum, so
    it agrees to float rounding even where a path bends too sharply for n points to reach the integral).
    Returns (scores (T,), f(x), f(baseline), target) with f the target's probability or logit."""
    import numpy as np
    import torch

    x, b, kw = _reference_inputs(lm, text, pair, baseline)
    with torch.no_grad():
        ends = _reference_out(lm, torch.cat([x, b]), {k: v.expand(2, -1) for k, v in kw.items()}, output)
    target = int(ends[0].argmax()) if target is None else target
    if gauss_legendre is None:
        alphas = (torch.arange(steps, dtype=torch.float64) + 0.5) / steps
        weights = torch.full((steps,), 1.0 / steps, dtype=torch.float64)
    else:
        nodes, w = np.polynomial.legendre.leggauss(gauss_legendre)
        alphas, weights = torch.from_numpy((nodes + 1) / 2), torch.from_numpy(w / 2)
    total = torch.zeros(x.shape[1], dtype=torch.float64)
    for chunk, wts in zip(alphas.split(256), weights.split(256)):
        path = (b + chunk.float().view(-1, 1, 1) * (x - b)).requires_grad_()  # (S, T, D)
        out = _reference_out(lm, path, {k: v.expand(len(chunk), -1) for k, v in kw.items()}, output)
        (grad,) = torch.autograd.grad(out[:, target].sum(), path)
        total += ((grad * (x - b)).sum(-1).double() * wts.view(-1, 1)).sum(0)
    return total.numpy(), float(ends[0, target]), float(ends[1, target]), target


def reference_ends(lm, text, pair=None, baseline="pad", output="prob"):
    """f(x) and f(baseline) (C,) by forward passes of the test's own (conftest.reference_f)."""
    return reference_f(lm, text, pair, output=output), reference_f(lm, text, pair, baseline=baseline, output=output)


def check_against_reference(lm, a, text, pair=None, n_steps=None, tolerance=None):
    """``a`` (an engine attribution of ``text``) against the independent reference: f(x) and f(baseline)
    from separate forward passes; delta = scores.sum() - (f(x) - f(baseline)) (Captum's sign); fixed
    steps: the scores equal the reference's same Gauss-Legendre rule to 1e-4 of f(x) - f(baseline);
    adaptive: the scores add up to f(x) - f(baseline) within ``tolerance`` of it, measured with the
    separate forward passes (what the method guarantees), and equal the integral (a 1024-point Riemann sum)
    within ``ADAPTIVE_TOKEN_SLACK`` x ``tolerance`` of the scores' total size (with a second text, scores of 3
    can cancel to a change of 0.2)."""
    import numpy as np

    f_x, f_b = reference_ends(lm, text, pair, a.baseline, a.output)
    t = a.target_index
    gap = f_x[t] - f_b[t]
    assert abs(gap) > 0.05, f"f(x) - f(baseline) = {gap:.3g}: too small for the comparison to test anything"
    assert a.f_x == pytest.approx(f_x[t], rel=1e-5, abs=1e-7)
    assert a.f_baseline == pytest.approx(f_b[t], rel=1e-5, abs=1e-7)
    assert a.delta == pytest.approx(float(a.scores.sum()) - gap, abs=1e-5 * abs(gap))
    if n_steps is not None:
        ref, *_ = reference_ig(lm, text, pair, a.baseline, a.output, t, gauss_legendre=n_steps)
        assert_scores_match(a.scores, ref, abs(gap), rtol=1e-4)
    if tolerance is not None:
        assert abs(float(a.scores.sum()) - gap) <= tolerance * abs(gap)
        kinks = lm.model.config.model_type == "distilbert"  # a ReLU in its head: see test_fixture_signal
        ref, *_ = reference_ig(lm, text, pair, a.baseline, a.output, t, steps=8192 if kinks else 1024)
        assert_scores_match(a.scores, ref, float(np.abs(ref).sum()), rtol=ADAPTIVE_TOKEN_SLACK * tolerance)
    return gap


# The adaptive steps bound the total (the delta), not each token: where tokens pull in opposite directions a segment's
# per-token errors cancel in its sum. Measured: DistilBERT's fixture, "the film was awful" with "it was fun", logit,
# 13 evaluations at tolerance 0.05: delta 4.4% of the change, the worst token off by 12.7% of the scores' total size
# (0.8% at tolerance 0.01); on other machines' fixtures it stayed under 5%. All-zero or halved scores are still
# off by 100% or 50%.
ADAPTIVE_TOKEN_SLACK = 3


def check_json_against_reference(out: dict, lm, text: str, n_steps: int | None = None,
                                 tolerance: float | None = None) -> float:
    """An Integrated Gradients record as JSON (/explain, /v1/explain, `explain --json`) against the
    independent reference on the model ``lm`` it came from (``check_against_reference``: separate
    forward passes, Captum's delta sign, the same rule); returns f(x) - f(baseline)."""
    from types import SimpleNamespace

    import numpy as np

    a = SimpleNamespace(f_x=out["f_x"], f_baseline=out["f_baseline"], delta=out["delta"], baseline=out["baseline"],
                        output="prob", target_index=lm.labels.index(out["target"]),
                        scores=np.asarray(out["attributions"], dtype=np.float64))
    return check_against_reference(lm, a, text, n_steps=n_steps, tolerance=tolerance)


def _reference_inputs(lm, text, pair, baseline):
    import inspect

    import torch

    tok, model = lm.tokenizer, lm.model
    enc = tok(text, pair, return_tensors="pt", truncation=True, max_length=lm.max_length)
    ids = enc["input_ids"]  # (1, T)
    accepted = inspect.signature(model.forward).parameters
    kw = {k: v for k, v in enc.items() if k != "input_ids" and k in accepted}
    words = model.get_input_embeddings()
    special = torch.tensor(tok.get_special_tokens_mask(ids[0].tolist(), already_has_special_tokens=True),
                           dtype=torch.bool)
    with torch.no_grad():
        x = words(ids)  # (1, T, D)
        if baseline == "zero":
            b = x * special.view(1, -1, 1)
        else:
            base_ids = ids.clone()
            base_ids[0, ~special] = getattr(tok, f"{baseline}_token_id")
            b = words(base_ids)
    return x, b, kw


def _reference_out(lm, embeds, kw, output):
    import torch

    logits = lm.model(inputs_embeds=embeds, **kw).logits.float()  # (B, C)
    return logits if output == "logit" else torch.softmax(logits, -1)


def assert_scores_match(scores, ref, scale: float, rtol: float = 0.01) -> None:
    """Per-token attributions ``scores`` equal ``ref`` within ``rtol`` of ``scale`` (|f(x) - f(b)|, the
    quantity they share out), and the test's ``scale`` is large enough for that to mean something."""
    import numpy as np

    assert scale > 0.05, f"f(x) - f(baseline) = {scale:.3g}: too small for the comparison to test anything"
    np.testing.assert_allclose(np.asarray(scores, dtype=np.float64), ref, rtol=0, atol=rtol * scale)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-bert")


@pytest.fixture(autouse=True)
def _no_result_cache(monkeypatch):
    """Analyses compute afresh in every test (the result cache has its own tests, which turn it on):
    models loaded before the test (the session's ``tiny``, the registry's cache) have their cache
    turned off for the test, undone after it. Models a test loads itself get its ``settings``."""
    import bertviz_app.models.registry as reg

    # the registry's cache, and the session's own models (a test that clears the registry's cache
    # would otherwise leave `tiny`, loaded before this switch, caching for every later test)
    for lm in {id(m): m for m in [*reg.cached_models(), *_SESSION_MODELS]}.values():
        monkeypatch.setattr(lm, "memo_size", 0)


@pytest.fixture()
def gpu_padding(monkeypatch):
    """``pad(multiple)``: from then on batches pad to a multiple of ``multiple`` tokens, as they do on a CUDA device
    (``inference.pad_multiple``; 1: exactly to the longest row, the CPU's), and the list it returns fills with the
    width of every batch the forward is given (to show that padding happened)."""
    from bertviz_app.models import inference

    real = inference.classifier_logits

    def pad(multiple: int) -> list[int]:
        widths: list[int] = []

        def spy(model, **inputs):
            widths.append(inputs["input_ids"].shape[1])
            return real(model, **inputs)

        monkeypatch.setattr(inference, "pad_multiple", lambda lm: multiple)
        monkeypatch.setattr(inference, "classifier_logits", spy)
        return widths

    return pad


_SESSION_MODELS: list = []  # session-scoped LoadedModels, whose result cache every test turns off


@pytest.fixture(scope="session")
def tiny(tiny_model_dir):
    from bertviz_app import load_model
    from bertviz_app.config import Settings

    lm = load_model(str(tiny_model_dir), device="cpu", settings=Settings(memo_size=0))
    _SESSION_MODELS.append(lm)
    return lm


@pytest.fixture()
def models_dir(tmp_path) -> Path:
    """An empty registry folder for this test (pass it on as ``Settings(models_dir=...)``, or use
    the ``settings`` fixture)."""
    d = tmp_path / "models"
    d.mkdir()
    return d


@pytest.fixture()
def settings(models_dir):
    """The settings a test hands the code under test: the defaults, with this test's empty models
    folder and no result cache (``dataclasses.replace(settings, ...)`` for other values)."""
    from bertviz_app.config import Settings

    return Settings(models_dir=models_dir, memo_size=0)


# --- serving the app and driving a browser (shared by the API, hostile-input and browser tests) ---

CHROMIUM = "/usr/bin/chromium"
# Flags for a closed network: without the background-networking ones Chromium keeps dialling out.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def as_uploaded(path) -> str:
    """``path`` copied into gradio's upload folder, where the page's upload leaves a file: the tabs'
    handlers read only files there (``bertviz_app.ui.uploads.upload_path``)."""
    import shutil
    import uuid

    from gradio.utils import get_upload_folder

    folder = Path(get_upload_folder()) / f"bertviz-test-{uuid.uuid4().hex}"
    folder.mkdir(parents=True)
    return str(shutil.copy(path, folder / Path(path).name))


def analyze_and_expect_entities(page, tagging, text: str | None = None) -> None:
    """Analyze on the Predict tab (``text`` typed first, else what the box holds), then the entity view shows each of
    ``tagging``'s entities (the library's answer for the same text) with its label."""
    from playwright.sync_api import expect

    if text is not None:
        page.locator("#bv-text textarea").fill(text)
    page.locator("#bv-analyze").click()
    entities = page.locator("#bv-entities")
    expect(entities).to_be_visible()
    for e in tagging.entities:
        expect(entities).to_contain_text(e.text)
        expect(entities).to_contain_text(e.label)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_launch(command, env: dict, timeout: float, cwd=None, attempts: int = 2) -> subprocess.CompletedProcess:
    """``command(attempt)`` (a multi-process launch; attempt 0, 1...) in its own process group. Past ``timeout`` every
    process it started, its group and the workers torch's elastic agent starts in sessions of their own, has its
    Python stacks printed (py-spy, where installed), and all are killed; the launch is then tried once more
    (``command`` gives it a fresh port and output), the first hang's stacks kept as a warning. Two CI runs under load
    hung here (2026-11-28: once after the run's JSON was printed, once with the workers' pipes unread); a second
    hang fails the test with its stacks. The returned process's ``args`` are the command that ran."""
    import warnings

    for attempt in range(attempts):
        cmd = command(attempt)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            report = _hung_launch(proc, cmd, timeout)
        if attempt + 1 < attempts:
            warnings.warn(f"launch attempt {attempt + 1} hung; trying again\n{report}", stacklevel=2)
    pytest.fail(report)


def _hung_launch(proc: subprocess.Popen, cmd: list[str], timeout: float) -> str:
    """What a hung launch was doing (py-spy stacks of it and every descendant, a few seconds each), then all of them
    killed; the output it had written, when its pipes can still be read."""
    import psutil

    try:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    stacks = []
    for p in family[:6]:
        try:
            dump = subprocess.run(["py-spy", "dump", "--nonblocking", "--pid", str(p.pid)], capture_output=True,
                                  text=True, timeout=15) if shutil.which("py-spy") else None
            text = dump.stdout + dump.stderr if dump else "(py-spy not installed)"
        except subprocess.TimeoutExpired:
            text = "(py-spy took over 15 s)"
        stacks.append(f"--- pid {p.pid}\n{text}")
    for p in family:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    try:
        os.killpg(proc.pid, signals.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # a process outside the family still holds the pipes
        out, err = "", "(the output could not be read: a process outside the launch holds its pipes)"
    # whether the work itself had finished (the last line is the JSON result) or hung before its end
    return (f"{cmd[3:6]} still running after {timeout} s (load average {os.getloadavg()[0]:.1f})\n"
            f"stdout's end: {out[-500:]}\nstderr's end: {err[-3000:]}\n" + "\n".join(stacks))


@contextmanager
def served_app(model: str, port: int | None = None, settings=None, **env):
    """The app (page and JSON API, ``bertviz_app.serve.server``) served in-process on loopback (``port``,
    default a free one) with ``settings`` (default: ``Settings()``), changed by ``BERTVIZ_*`` keywords
    read as the environment would be: ``with served_app(model, BERTVIZ_MODELS_DIR=d) as url: ...``.
    Other keywords are set in the environment for the app's lifetime. Closed on exit."""
    import dataclasses

    from bertviz_app.config import Settings, env_name
    from bertviz_app.serve import server

    given = {k: str(v) for k, v in env.items() if k.startswith("BERTVIZ_")}
    parsed = Settings.from_env(given)
    changed = {f.name: getattr(parsed, f.name) for f in dataclasses.fields(Settings) if env_name(f) in given}
    settings = dataclasses.replace(settings or Settings(), **changed, host="127.0.0.1",
                                   port=port or free_port())
    mp = pytest.MonkeyPatch()
    try:
        for name, value in env.items():  # the app reads ``settings``; other variables (HF_*) go to the environment
            if name not in given:
                mp.setenv(name, str(value))
        with server.start(settings, model):
            yield f"http://127.0.0.1:{settings.port}/"
    finally:
        mp.undo()


def queue_event(url: str, fn_index: int, data: list, session: str | None = None) -> dict:
    """An event of the page joined to gradio's queue over raw HTTP (``/gradio_api/queue/join``, as the page
    does) in ``session`` (default: a new one) and followed to its end: its process_completed message
    (``success``, ``output``)."""
    import json
    import uuid

    import httpx

    session = session or uuid.uuid4().hex[:10]
    body = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None}
    r = httpx.post(f"{url}gradio_api/queue/join", json=body, timeout=30)
    assert r.status_code == 200, r.text
    with httpx.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}, timeout=120) as s:
        for line in s.iter_lines():
            if line.startswith("data:"):
                msg = json.loads(line[5:])
                if msg.get("msg") == "process_completed":
                    return msg
    raise AssertionError(f"event {fn_index} never completed")


FINETUNE_FIELDS = {"epochs": "bv-ft-epochs", "batch": "bv-ft-batch", "lr": "bv-ft-lr", "patience": "bv-ft-patience"}


def start_finetune(page, base, name: str | None = None, mode: str | None = None, **advanced) -> None:
    """In the Fine-tune tab (a table already uploaded): choose ``base``, the mode (its label, e.g. "probe:
    frozen encoder"), name the run, fill the Advanced fields given (``epochs=3, batch=8, lr=0.0005,
    patience=0``) and press Start."""
    field = page.locator("#bv-ft-base input")
    field.fill(str(base))
    field.press("Enter")
    if mode:
        page.get_by_text(mode).click()
    if name:
        page.locator("#bv-ft-name textarea, #bv-ft-name input").first.fill(name)
    if advanced:
        page.get_by_text("Advanced").click()
    for key, value in advanced.items():
        elem = FINETUNE_FIELDS[key]
        page.locator(f"#{elem} textarea, #{elem} input").first.fill(str(value))
    page.locator("#bv-ft-start").click()


def evaluate_file(page, url: str, path, timeout_ms: int) -> None:
    """The Evaluate tab run on the labelled file ``path`` (its label column found as "label") until the status
    says Done."""
    from playwright.sync_api import expect

    page.goto(url)
    page.get_by_role("tab", name="Evaluate").click()
    page.locator("#bv-ev-upload input[type=file]").set_input_files(str(path))
    expect(page.locator("#bv-ev-label-col input")).to_have_value("label")
    page.locator("#bv-ev-start").click()
    expect(page.locator("#bv-ev-status")).to_contain_text("Done", timeout=timeout_ms)


def open_page(browser, timeout_ms: int):
    """A page in a fresh browser context (1280 x 900, its own storage) with ``timeout_ms`` as the default
    timeout; close it with ``page.context.close()``."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    page = ctx.new_page()
    page.set_default_timeout(timeout_ms)
    return page


@pytest.fixture()
def page(browser, request):
    """A page in a fresh browser context with the test module's ``TIMEOUT_MS`` (60 s without one),
    closed after the test."""
    pg = open_page(browser, getattr(request.module, "TIMEOUT_MS", 60_000))
    yield pg
    pg.context.close()


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright (a browser download is impossible here). Every ``expect`` waits up
    to 30 s for its condition (Playwright's default, 5 s, failed waits on a queued event on a loaded 2-core CI
    machine; a condition met sooner returns at once, so a passing test is no slower)."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=30_000)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(autouse=True, scope="session")
def _repository_models_untouched():
    """No test writes into the checkout's models/ folder (a test that forgets to hand its own
    ``models_dir`` to the code under test would leave runs there): checked once, after the session."""
    root = Path(__file__).resolve().parent.parent / "models"
    before = {p.relative_to(root) for p in root.rglob("*")} if root.is_dir() else set()
    yield
    after = {p.relative_to(root) for p in root.rglob("*")} if root.is_dir() else set()
    new = sorted(str(p) for p in after - before if p.parts[0] != ".build" and "__pycache__" not in p.parts)
    assert not new, f"tests wrote into the repository's models/ folder: {new[:10]}"


def _tracked_changes(root: Path) -> dict[str, str] | None:
    """{path: sha256 of its bytes} of the tracked files that differ from git's index or HEAD (a deleted one:
    "deleted"); None outside a git checkout (a source tarball, no git)."""
    import hashlib
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v1", "-z", "--untracked-files=no"],
                             capture_output=True, check=True, timeout=60).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return None
    changed = {}
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        if entry[0] in "RC":  # a rename's entry is followed by its old path
            i += 1
        path = root / entry[3:]
        changed[entry[3:]] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "deleted"
    return changed


def _tracked_files(root: Path) -> set[str] | None:
    """The absolute paths of the checkout's tracked files; None outside a git checkout."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True,
                             timeout=60).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError):
        return None
    return {os.path.join(str(root), p) for p in out.split("\0") if p}


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_WRITE_EVENTS = {"open", "os.rename", "os.remove", "os.truncate"}


@pytest.fixture(autouse=True, scope="session")
def _tracked_files_untouched():
    """No test writes a tracked file of the checkout (docs/ pictures, models/ cards, data); the README's
    pictures are made by scripts/readme_images.py, never by a test. Two watches, skipped outside a git checkout:
    - every write, rename or removal this process makes (the served apps run in it) is seen by an audit hook
      and names the test that made it: exact, and blind to an editor saving a file while the tests run;
    - in CI (``CI`` set: a fresh clone nobody edits) the tracked files that differ from git are also the same,
      byte for byte, before and after the session, which sees writes by subprocesses too."""
    import sys

    root = Path(__file__).resolve().parent.parent
    tracked = _tracked_files(root)
    if tracked is None:
        yield
        return
    written: list[str] = []
    watching = [True]

    def hook(event, args):
        if event not in _WRITE_EVENTS or not watching[0]:
            return
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int) or not (mode is None and flags & _WRITE_FLAGS
                                             or isinstance(mode, str) and any(c in mode for c in "wax+")):
                return
            paths = [(path, None)]
        elif event == "os.rename":  # (src, dst, src_dir_fd, dst_dir_fd)
            paths = [(args[0], args[2]), (args[1], args[3])]
        else:  # (path, dir_fd): shutil.rmtree removes names relative to an open folder
            paths = [(args[0], args[1] if len(args) > 1 else None)]
        for one, dir_fd in paths:
            if isinstance(one, (str, bytes, os.PathLike)):
                one = os.fsdecode(one)
                if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(one):
                    try:
                        one = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), one)
                    except OSError:
                        continue
                full = os.path.abspath(one)
                if full in tracked:
                    written.append(f"{os.path.relpath(full, root)} ({event}, by "
                                   f"{os.environ.get('PYTEST_CURRENT_TEST', 'no test')})")

    sys.addaudithook(hook)  # an audit hook cannot be removed: it stops watching after the session
    in_ci = bool(os.environ.get("CI"))
    before = _tracked_changes(root) if in_ci else None
    try:
        yield
    finally:
        watching[0] = False
    assert not written, f"tests wrote tracked files of the checkout: {written[:10]}"
    if before is not None:
        after = _tracked_changes(root) or {}
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
        assert not changed, f"tests changed tracked files of the checkout: {changed[:10]}"
