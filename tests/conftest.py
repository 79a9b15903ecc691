"""Shared fixtures: a tiny BERT classifier built from scratch and saved with save_pretrained,
so the loading path the app uses is the real one. No downloads, runs in a second."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-bert")


@pytest.fixture(autouse=True)
def _no_result_cache(monkeypatch):
    """Analyses compute afresh in every test (the result cache has its own tests, which turn it on):
    models loaded before the test (the session's ``tiny``, the registry's cache) have their cache
    turned off for the test, undone after it. Models a test loads itself get its ``settings``."""
    import bertviz_app.registry as reg

    # the registry's cache, and the session's own models (a test that clears the registry's cache
    # would otherwise leave `tiny`, loaded before this switch, caching for every later test)
    for lm in {id(m): m for m in [*reg.cached_models(), *_SESSION_MODELS]}.values():
        monkeypatch.setattr(lm, "memo_size", 0)


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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served_app(model: str, port: int | None = None, settings=None, **env):
    """The app (page and JSON API, ``bertviz_app.server``) served in-process on loopback (``port``,
    default a free one) with ``settings`` (default: ``Settings()``), changed by ``BERTVIZ_*`` keywords
    read as the environment would be: ``with served_app(model, BERTVIZ_MODELS_DIR=d) as url: ...``.
    Other keywords are set in the environment for the app's lifetime. Closed on exit."""
    import dataclasses

    from bertviz_app import server
    from bertviz_app.config import Settings, env_name

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
    """Debian's Chromium driven by Playwright (a browser download is impossible here)."""
    from playwright.sync_api import sync_playwright

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
