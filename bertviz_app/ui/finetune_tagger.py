"""The Fine-tune tab's tagger (token classification) helpers: which task an upload is for, what was read from a
tagged file (sentences, tags, entities per type, the scheme), the tab's fields to a ``TaggerPlan``, and a finished
tagger run (entity F1 per type, the verdict against tagging every word ``O``, the sentences it got wrong). Pure
helpers, tested alone; the events are ``finetune_tab``'s.

Which task: a file only one reader takes (a CoNLL or tokens JSON-lines file: the tagger's; a table with a text and
a label: the classifier's) sets the task itself; a CSV both read (``tokens`` and ``tags`` columns of equal lengths)
waits for the user's choice, unless they chose one already."""

from __future__ import annotations

import pandas as pd

import bertviz_app as core

from . import guards
from .evaluate_tagger import FILE_TYPES
from .finetune_view import head_settings
from .markup import esc

__all__ = ["CHOOSE", "FILE_TYPES", "MODE_NOTE", "SEQUENCE", "TASK_CHOICES", "TOKEN", "choose_task", "entity_counts",
           "entities_text", "metrics_md", "per_type_frame", "plan_from_fields", "preview_frame",
           "read_tagged_upload", "report_md", "sample_text", "summary_md", "verdict_md", "wrong_frame",
           "wrong_rows"]

SEQUENCE, TOKEN = "sequence", "token"
TASK_CHOICES = [("sequence classification (a label per text)", SEQUENCE),
                ("token classification (tagger: a tag per word)", TOKEN)]
CHOOSE = ("**Choose the task** above: this table reads both as texts with labels and as tagged sentences (its tokens "
          "and tags columns).")
MODE_NOTE = "a tagger trains every weight (full); probe and both read the [CLS] vector, a text classifier's input"
MAX_LEN_NOTE = "a tagger reads whole sentences: one longer than the model reads is refused with its line, never cut"
PREVIEW_SENTENCES = 10
TAGGED_EXTENSIONS = tuple(e for e in FILE_TYPES if e not in (".csv", ".tsv", ".txt"))  # a tagged file's names
TAGGER_MODE = "tagger"


# --------------------------------------------------------------------------- intake
def read_tagged_upload(path: str | None, settings: core.Settings | None = None, what: str = "training file"):
    """-> (TaggedFile | None, refusal | None): the upload read as tagged sentences (``read_tagged``), or why not
    (``guards.refused_file``'s words about the ``what``, for the status line and a later Start)."""
    if not path:
        return None, None
    settings = settings if settings is not None else core.Settings()
    try:
        return core.read_tagged(path, max_upload_mb=settings.max_upload_mb, max_sentences=settings.max_rows), None
    except core.DataError as exc:
        return None, guards.refused_file(path, exc, what)


def choose_task(table, tagged, table_refused: str | None, picked: str | None, name: str | None = None
                ) -> str | None:
    """The task an upload is for: the one reader that took it; the user's pick (None: ask) when both did; when
    neither did, the pick, else the token task for a file the classifier's reader refused as tagged tokens or
    named as a tagged file (``name``: .conll, .jsonl, .iob), so its refusal is the tagged reader's."""
    if tagged is not None and table is None:
        return TOKEN
    if table is not None and tagged is None:
        return SEQUENCE
    if table is not None:
        return picked
    if picked:
        return picked
    tagged_name = str(name or "").lower().endswith(TAGGED_EXTENSIONS)
    return TOKEN if tagged_name or "token-classification" in (table_refused or "") else SEQUENCE


def entity_counts(tf) -> dict[str, int]:
    """Entities per type in the file (IOB2: each ``B-X`` starts one; IO: each run of one type is one)."""
    counts: dict[str, int] = {t: 0 for t in tf.types}
    for s in tf.sentences:
        for _, label, _, _ in _spans(s.tags):
            counts[label] = counts.get(label, 0) + 1
    return counts


def _spans(tags) -> list[tuple[int, str, int, int]]:
    """(index, type, first word, end word) of each entity in one sentence's tags (IOB2 or IO)."""
    out, cur = [], None
    for i, t in enumerate(list(tags) + ["O"]):
        kind = None if t == "O" else t[2:] if t[:2] in ("B-", "I-") else t
        cont = cur is not None and kind == cur[1] and not t.startswith("B-")
        if cont:
            continue
        if cur is not None:
            out.append((len(out), cur[1], cur[0], i))
        cur = (i, kind) if kind else None
    return out


def entities_text(tokens, tags) -> str:
    """A sentence's entities in words: ``gorgeous moving (POS), awful (NEG)``; ``(none)`` without one."""
    spans = _spans(tags)
    return ", ".join(f"{' '.join(tokens[a:b])} ({label})" for _, label, a, b in spans) or "(none)"


def summary_md(tf) -> str:
    """The notices line of a tagged upload: the file, its sentences and words, format and scheme, what the reader
    did."""
    unit = "line" if tf.unit == "line" else "spreadsheet row"
    lines = [f"**{esc(tf.name)}**: {len(tf.sentences):,} sentences, {tf.n_tokens:,} words, read as tagged sentences "
             f"({esc(tf.format)}; numbers are {unit}s). Task: token classification (a tagger)."]
    return "  \n".join(lines + [f"Note: {esc(n)}" for n in tf.notices])


def report_md(tf) -> str:
    """What a tagger would learn: the tags, the entities per type, the scheme."""
    counts = entity_counts(tf)
    per = ", ".join(f"{esc(t)} ({n:,})" for t, n in counts.items()) or "none"
    total = sum(counts.values())
    lines = [f"**{len(tf.sentences):,} sentences**, {total:,} entities of {len(counts)} types: {per}.",
             f"Tags ({esc(tf.scheme)}): {', '.join(esc(t) for t in tf.tags)}."]
    if not total:
        lines.append("**Error:** the file tags no entity: every word is O. Tag the entities (B-TYPE, I-TYPE).")
    else:
        lines.append("Ready to train a tagger.")
    return "  \n".join(lines)


def preview_frame(tf, n: int = PREVIEW_SENTENCES) -> pd.DataFrame:
    """The first sentences as read: where each starts, its words, its tags and its entities."""
    unit = "line" if tf.unit == "line" else "row"
    rows = [[s.where, " ".join(s.tokens), " ".join(s.tags), entities_text(s.tokens, s.tags)]
            for s in tf.sentences[:n]]
    return pd.DataFrame(rows, columns=[unit, "words", "tags", "entities"])


def plan_from_fields(tagged, val_tagged, base, name, epochs, lr, batch, seed, patience, val_fraction, warmup=None,
                     refused=None, val_refused=None, settings: core.Settings | None = None, freeze=None):
    """The tab's fields -> ``core.plan_tagger`` (blank numbers automatic). ``refused``/``val_refused``: why the
    training/validation file shown was refused as tagged sentences (say it, not "upload one")."""
    if tagged is None:
        raise core.DataError(refused or "Upload a tagged training file first: a CoNLL file (a word and its tag per "
                             "line, a blank line between sentences), JSON lines with tokens and tags, or a CSV with "
                             "tokens and tags columns.")
    if val_refused and val_tagged is None:
        raise core.DataError(val_refused.replace("Fix the file and upload it again.", "Fix the file and upload it "
                             "again, or remove it to hold out part of the training data instead."))
    if not sum(entity_counts(tagged).values()):
        raise core.DataError(f"{tagged.name} tags no entity: every word is O. Tag the entities (B-TYPE, I-TYPE).")
    return core.plan_tagger(tagged, val_tagged, base=base, name=name, settings=settings,
                          **head_settings(epochs, lr, batch, seed, patience, val_fraction, warmup, freeze,
                                          epochs_example="3", patience_example="3"))


# --------------------------------------------------------------------------- a finished run
def _head(r) -> str:
    if r.cancelled:
        return "Cancelled: not judged."
    return "Learned." if r.learned else "Not learned."


def verdict_md(r) -> str:
    """The run's verdict against tagging every word O, as the library words it."""
    message = r.verdict
    for lead in ("Learned: ", "Not learned: "):
        message = message.removeprefix(lead)
    return f"**{_head(r)}** {esc(r.name)} (tagger): {esc(message)}"


def _iv(iv, key: str = "f1") -> str:
    return f"{iv[key][0]:.3f}–{iv[key][1]:.3f}" if iv and iv.get(key) else "n/a"


def metrics_md(r, notices=()) -> str:
    """Entity F1, precision and recall with 95% intervals, words tagged right against all O, per type, the wrong
    sentences, the time; a cancelled run says it holds the best weights found before the cancel."""
    m = r.metrics
    base = m["baseline"]["token_accuracy"]
    lines = [f"### {esc(r.name)} (tagger)",
             f"**Entity F1 {m['entity_f1']:.3f}** (95% interval {_iv(m.get('interval'))}) · precision "
             f"{m['precision']:.3f} · recall {m['recall']:.3f} on {m.get('support', 0):,} validation entities · "
             f"words tagged right {m['token_accuracy']:.1%} (tagging every word O: {base:.1%}) · "
             f"{len(r.wrong):,} validation sentences with a wrong tag · {r.seconds:.0f} s",
             "", "| type | precision | recall | F1 | F1 95% interval | support |", "|---|---|---|---|---|---|"]
    lines += [f"| {esc(t)} | {v['precision']:.3f} | {v['recall']:.3f} | {v['f1']:.3f} | {_iv(v.get('interval'))} | "
              f"{v['support']:,} |" for t, v in m["per_type"].items()]
    tail = ["", "Entities are matched strictly (type, first and last word); intervals: a bootstrap over sentences."]
    if r.cancelled:
        tail.append(f"**Cancelled:** {esc(r.name)} holds the best weights found before the cancel.")
    tail += [f"Note: {esc(n)}" for n in dict.fromkeys([*notices, *r.notices])]
    tail.append(f"The model is selected in the explorer tabs as **{esc(r.name)}**.")
    return "\n".join(lines) + "\n" + "  \n".join(tail)


def per_type_frame(r) -> pd.DataFrame:
    """The per-class table's columns, one row per entity type."""
    rows = [[TAGGER_MODE, t, round(v["precision"], 3), round(v["recall"], 3), round(v["f1"], 3), v["support"]]
            for t, v in r.metrics["per_type"].items()]
    return pd.DataFrame(rows, columns=["mode", "class", "precision", "recall", "F1", "support"])


def wrong_rows(r) -> list[dict]:
    """The validation sentences with a wrong tag as the tab's selectable rows (mode and row first, as
    ``finetune_view.pick_row`` reads them)."""
    return [{"mode": TAGGER_MODE, "row": w["where"], "true": entities_text(w["tokens"], w["tags"]),
             "predicted": entities_text(w["tokens"], w["predicted"]), "text": " ".join(w["tokens"]), "run": r.name}
            for w in r.wrong]


def wrong_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([[w["mode"], w["row"], w["true"], w["predicted"], w["text"]] for w in rows],
                        columns=["mode", "line", "true entities", "predicted entities", "text"])


def sample_text(r, tf) -> str:
    """A sentence to open the new tagger on: the first it got wrong, else the file's first one with an entity."""
    if r.wrong:
        return " ".join(r.wrong[0]["tokens"])
    for s in tf.sentences:
        if any(t != "O" for t in s.tags):
            return " ".join(s.tokens)
    return " ".join(tf.sentences[0].tokens) if tf.sentences else ""
