"""The Evaluate tab's view of a tagger's evaluation (``evaluate_tagged``'s ``TaggerEvaluation``, and
``compare_taggers``' ``TaggerComparison``): the entity scores with their intervals, the verdict against tagging
every word ``O``, per type, the slices, the sentences with a wrong tag. Pure helpers, tested alone; the handler is
``evaluate_events.Handlers.evaluate_tagger``.

A tagger's evaluation is shown, not stored: the stored evaluations are classifier run folders (predictions.csv,
calibration, geometry) that a tagger's evaluation has none of. ``NOT_STORED`` says so on the page.
"""

from __future__ import annotations

import pandas as pd

from .finetune_view import shown_name
from .markup import esc

__all__ = ["CLASSIFIER_FILE", "CLASSIFIER_UPLOAD", "FILE_TYPES", "NOT_STORED", "TAGGER_FILE", "TAGGER_UPLOAD",
           "comparison_md", "errors_frame", "slices_frame", "summary_md", "tagged_md", "types_frame"]

NOT_STORED = ("A tagger's evaluation is shown here and **not stored** (the stored evaluations below hold sequence "
              "classifiers' runs): `python -m bertviz_app evaluate FILE --model MODEL --json` writes the same numbers "
              "as JSON.")
# the upload's label and the file hint under it, by the chosen model's head; the types of both heads' files
CLASSIFIER_UPLOAD = "Labelled file (.csv, .tsv, .txt)"
TAGGER_UPLOAD = "Tagged file (CoNLL, .jsonl, .csv)"
FILE_TYPES = [".csv", ".tsv", ".txt", ".conll", ".jsonl", ".iob"]
CLASSIFIER_FILE = ("**File for this classifier:** a table (.csv, .tsv or .txt with a header row) with a text column "
                   "and a label column, one class per row (optionally a second text column for sentence pairs).")
TAGGER_FILE = ("**File for this tagger:** tagged words: a CoNLL file (a word and its tag per line, a blank line "
               "between sentences), JSON lines with `tokens` and `tags`, or a CSV with `tokens` and `tags` columns; "
               "tags in IOB2 (`B-PER`, `I-PER`, `O`) or IO.")
MAX_ERRORS = 200  # wrong sentences listed (the evaluation's own cap for its JSON)


def tagged_md(tf) -> str:
    """What was read from a tagged upload (``read_tagged``'s ``TaggedFile``): sentences, words, format, the entity
    types, and what the reader did."""
    types = ", ".join(esc(t) for t in tf.types) or "none"
    lines = [f"**{esc(tf.name)}**: {len(tf.sentences):,} sentences, {tf.n_tokens:,} words ({esc(tf.format)}, "
             f"{esc(tf.scheme)} tags; entity types: {types}). Press Evaluate."]
    return "  \n".join(lines + [f"Note: {esc(n)}" for n in tf.notices])


def _iv(interval) -> str:
    return "–" if interval is None else f"{interval[0]:.3f}–{interval[1]:.3f}"


def _f(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def summary_md(ev, stored_note: bool = True) -> str:
    """The overall entity scores with their 95% intervals, the words tagged right against the all-``O`` share, the
    verdict (when the record has it), what the reader did, and that it is not stored."""
    r = ev.report
    iv = r.get("interval") or {}
    head = [f"### {esc(shown_name(ev.model))} on {esc(ev.source)}",
            f"{ev.n_sentences:,} sentences ({esc(ev.format)}), entities matched strictly ({esc(ev.scheme)}: type, "
            "first and last word); 95% intervals by a bootstrap over sentences."]
    table = ["| | score | 95% interval |", "|---|---|---|",
             f"| **entity F1** | **{r['entity_f1']:.3f}** | {_iv(iv.get('f1'))} |",
             f"| precision | {r['precision']:.3f} | {_iv(iv.get('precision'))} |",
             f"| recall | {r['recall']:.3f} | {_iv(iv.get('recall'))} |"]
    tail = [f"Entities: {r['support']:,} true, {r['predicted']:,} found."]
    base = r.get("baseline")
    if base is not None and r.get("token_accuracy") is not None:
        tail.append(f"Words tagged right: **{r['token_accuracy']:.1%}** (tagging every word O, the baseline: "
                    f"{base['token_accuracy']:.1%} of words right, entity F1 {base['entity_f1']:.3f}).")
    if r.get("verdict"):
        tail.append(f"**Verdict:** {esc(r['verdict'])}")
    tail += [f"Note: {esc(n)}" for n in ev.notices]
    if stored_note:
        tail.append(NOT_STORED)
    return "\n\n".join(["  \n".join(head), "\n".join(table), "  \n".join(tail)])


TYPE_COLUMNS = ["type", "precision", "recall", "F1", "F1 95% interval", "support", "found"]


def types_frame(ev) -> pd.DataFrame:
    """Per entity type: precision, recall, F1 with its interval, true and found entities."""
    if ev is None:
        return pd.DataFrame(columns=TYPE_COLUMNS)
    rows = [[t, round(s["precision"], 3), round(s["recall"], 3), round(s["f1"], 3),
             _iv(None if s.get("interval") is None else s["interval"]["f1"]), s["support"], s.get("predicted", "")]
            for t, s in ev.per_type.items()]
    return pd.DataFrame(rows, columns=TYPE_COLUMNS)


SLICE_COLUMNS = ["kind", "slice", "sentences", "true entities", "F1", "95% interval"]


def slices_frame(ev) -> pd.DataFrame:
    """The slices by sentence length and by the words asked for (the types are in ``types_frame``), worst first
    (an empty slice last)."""
    if ev is None:
        return pd.DataFrame(columns=SLICE_COLUMNS)
    shown = sorted((s for s in ev.slices if s.kind != "type"), key=lambda s: (s.f1 is None, s.f1 or 0.0))
    return pd.DataFrame([[s.kind, s.name, s.n_sentences, s.support, _f(s.f1), _iv(s.interval)] for s in shown],
                        columns=SLICE_COLUMNS)


ERROR_COLUMNS = ["where", "sentence: word[true→predicted] where they differ"]


def errors_frame(ev) -> pd.DataFrame:
    """The sentences with a wrong tag, in file order (the first ``MAX_ERRORS``), each wrong word marked."""
    if ev is None:
        return pd.DataFrame(columns=ERROR_COLUMNS)
    rows = []
    for e in ev.errors(MAX_ERRORS):
        wrong = set(e["wrong"])
        words = [f"{w}[{t}→{p}]" if i in wrong else w
                 for i, (w, t, p) in enumerate(zip(e["tokens"], e["tags"], e["predicted"]))]
        rows.append([f"{ev.unit} {e['where']}", " ".join(words)])
    return pd.DataFrame(rows, columns=ERROR_COLUMNS)


def comparison_md(c) -> str:
    """Two taggers on the same sentences: both F1s, B - A with its paired interval, per type, sentences right."""
    if c is None:
        return ""
    a, b = shown_name(c.a.model), shown_name(c.b.model)
    s = c.sentences
    lines = [f"### {esc(a)} (A) and {esc(b)} (B) on the same {c.a.n_sentences:,} sentences",
             f"Entity F1: A {c.a.entity_f1:.3f}, B {c.b.entity_f1:.3f}; B − A **{c.difference:+.3f}** (95% paired "
             f"interval {c.interval[0]:+.3f} to {c.interval[1]:+.3f}). {esc(c.reading)}",
             f"Sentences wholly right: both {s['both_right']:,}, only A {s['only_a_right']:,}, only B "
             f"{s['only_b_right']:,}, neither {s['both_wrong']:,}."]
    out = "  \n".join(lines)
    if c.per_type:
        rows = ["| type | F1 A | F1 B | B − A | 95% interval | support |", "|---|---|---|---|---|---|"]
        rows += [f"| {esc(t)} | {d['f1_a']:.3f} | {d['f1_b']:.3f} | {d['difference']:+.3f} | "
                 f"{d['interval'][0]:+.3f} to {d['interval'][1]:+.3f} | {d['support']:,} |"
                 for t, d in c.per_type.items()]
        out += "\n\n" + "\n".join(rows)
    return out
