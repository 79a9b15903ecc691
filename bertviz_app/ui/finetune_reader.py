"""The Fine-tune tab's reader (question answering: an answer span from a context) helpers: which task an upload is
for, what was read from a SQuAD file (questions, contexts, answerable and unanswerable, every answer checked at its
offset by ``read_squad``), the tab's fields to a ``ReaderPlan``, and a finished reader run (held-out exact match and
F1 against always "no answer" and the fixed-position guess, the verdict, the questions it answered wrong). Pure
helpers, tested alone; the events are ``finetune_tab``'s and ``finetune_uploads``'.

Which task: a file the reader takes (SQuAD JSON, or a table with question, context, answer_text and answer_start
columns, which the classifier's table reader also reads) is a question answering file, and so is one that looks
meant as one but is refused (a ``.json`` name, or a SQuAD-shaped start: the refusal shown is then ``read_squad``'s,
an answer not at its offset say); any other file is the classifier's or the tagger's (``finetune_tagger``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

import bertviz_app as core
from bertviz_app.train.data.squad import looks_like_squad

from . import finetune_tagger as tagger
from . import guards
from .evaluate_reader import FILE_TYPES
from .finetune_view import head_settings
from .markup import esc

__all__ = ["FILE_TYPES", "MAX_LEN_NOTE", "MODE_NOTE", "NO_ANSWER", "QUESTION", "READER_MODE", "TASK_CHOICES",
           "choose_task", "looks_meant", "metrics_md", "other_task_refusal", "plan_from_fields", "preview_frame",
           "read_squad_upload", "report_md", "sample", "summary_md", "val_notes", "verdict_md", "wrong_frame",
           "wrong_rows"]

QUESTION = "question"
TASK_CHOICES = [*tagger.TASK_CHOICES, ("question answering (reader: an answer span from a context)", QUESTION)]
MODE_NOTE = "a reader trains every weight (full); probe and both read the [CLS] vector, a text classifier's input"
MAX_LEN_NOTE = ("a reader reads a long context in windows of the model's length, neighbours sharing context tokens: "
                "never cut")
NO_ANSWER = "(no answer)"
READER_MODE = "reader"
PREVIEW_QUESTIONS = 10
CONTEXT_SHOWN = 240  # characters of a context in the preview
HEAD_BYTES = 1 << 16  # what looks_meant reads of a file


# --------------------------------------------------------------------------- intake
def read_squad_upload(path: str | None, settings: core.Settings | None = None, what: str = "training file"):
    """-> (QAFile | None, refusal | None): the upload read as questions with their contexts and answers
    (``read_squad``: SQuAD JSON or a question/context/answer_text/answer_start CSV, every answer checked at its
    offset), or why not (``guards.refused_file``'s words about the ``what``)."""
    if not path:
        return None, None
    settings = settings if settings is not None else core.Settings()
    try:
        return core.read_squad(path, max_upload_mb=settings.max_upload_mb, max_questions=settings.max_rows), None
    except core.DataError as exc:
        return None, guards.refused_file(path, exc, what)


def looks_meant(path: str | None) -> bool:
    """Is the upload meant as a question answering file: a ``.json`` name (no other task's reader takes one), or a
    start that reads as SQuAD JSON or a question/context/answer table (``looks_like_squad``)?"""
    if not path:
        return False
    if str(path).lower().endswith(".json"):
        return True
    try:
        with Path(path).open("rb") as fh:
            head = fh.read(HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return False
    return looks_like_squad(head)


def choose_task(table, tagged, qa, table_refused: str | None, picked: str | None, name: str | None = None,
                meant: bool = False) -> str | None:
    """The task an upload is for: question answering for a file the reader took or one meant as a question answering
    file (``meant``: ``looks_meant``), so a broken one shows the reader's refusal; otherwise the classifier's or the
    tagger's (``finetune_tagger.choose_task``), a pick of question answering standing only for a file no reader
    took (a file both other readers take waits for a choice between them)."""
    if qa is not None or meant:
        return QUESTION
    if picked == QUESTION and (table is not None or tagged is not None):
        picked = None
    return tagger.choose_task(table, tagged, table_refused, picked, name)


def other_task_refusal(path: str | None, qa) -> str:
    """What the classifier's and the tagger's task say of a file the reader took: it holds questions, and which task
    trains on it."""
    name = str(path or qa.name).replace("\\", "/").rsplit("/", 1)[-1]
    fmt = "question/context/answer columns" if _format(qa).startswith("CSV") else "SQuAD JSON"
    return (f"The training file {name} holds {len(qa.examples):,} questions for question answering ({fmt}): choose the "
            "task question answering above to train a reader on it. Sequence classification reads a table of texts "
            "and labels, token classification a tagged file.")


def not_questions(refusal: str, table, tagged) -> str:
    """The reader's refusal of a file another task's reader took (a classifier's table, a tagged file) chosen as a
    question answering file: what the reader said, and the task that does read it."""
    task = "token classification" if tagged is not None and table is None else "sequence classification"
    return refusal.replace("Fix the file and upload it again.",
                           f"Choose the task {task} above to train on it, or upload a question answering file.")


def _contexts(qa) -> int:
    return len({e.context for e in qa.examples})



def _format(qa) -> str:
    """SQuAD JSON (with its version) or a table."""
    if qa.format == "squad":
        return "SQuAD JSON" + (f" {qa.version}" if qa.version else "")
    return "CSV with question, context, answer_text and answer_start columns"


def summary_md(qa) -> str:
    """The notices line of a question answering upload: the file, its questions and contexts, its format, what
    names a question, what the reader did."""
    unit = "their id" if qa.unit == "id" else "their spreadsheet row"
    lines = [f"**{esc(qa.name)}**: {len(qa.examples):,} questions on {_contexts(qa):,} contexts, read as questions "
             f"for question answering ({esc(_format(qa))}; questions are named by {unit}). Task: question answering "
             "(a reader)."]
    return "  \n".join(lines + [f"Note: {esc(n)}" for n in qa.notices])


def report_md(qa) -> str:
    """What a reader would learn: the answerable and unanswerable questions, the answers (each checked at its
    offset), and why a file on one context cannot be judged."""
    n, none = len(qa.examples), qa.n_impossible
    answers = sum(len(e.answers) for e in qa.examples)
    lines = [f"**{n:,} questions** on {_contexts(qa):,} contexts: {n - none:,} answerable ({answers:,} answers, each "
             f"found at its answer_start in its context), {none:,} unanswerable (no answer)."]
    if not none:
        lines.append("Every question has an answer (SQuAD 1.1): the reader will always answer with a span.")
    if _contexts(qa) < 2:
        lines.append("**Error:** every question is on one context. A reader is judged on held-out contexts (every "
                     "question of a context on one side): add questions on more contexts, or give a validation file.")
    else:
        lines.append("Ready to train a reader.")
    return "  \n".join(lines)


def _cut(text: str, n: int = CONTEXT_SHOWN) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def preview_frame(qa, n: int = PREVIEW_QUESTIONS) -> pd.DataFrame:
    """The first questions as read: what names each, the question, its answer and offset, the context (cut)."""
    unit = "id" if qa.unit == "id" else "row"
    rows = [[e.id, e.question, " | ".join(t for t, _ in e.answers) or NO_ANSWER,
             ", ".join(str(s) for _, s in e.answers), _cut(e.context)] for e in qa.examples[:n]]
    return pd.DataFrame(rows, columns=[unit, "question", "answer", "answer_start", "context"])


def val_notes(qa) -> str:
    """The notices line of a question answering validation file."""
    notes = [f"Validation file **{esc(qa.name)}**: {len(qa.examples):,} questions on {_contexts(qa):,} contexts "
             f"({qa.n_impossible:,} unanswerable; {esc(_format(qa))})."]
    return "  \n".join(notes + [f"Note: {esc(n)}" for n in qa.notices])


REUPLOAD = ("The validation file shown was read for another task: upload it again now that the task is question "
            "answering, or remove it to hold out part of the training data instead.")


def plan_from_fields(qa, val_qa, base, name, epochs, lr, batch, seed, patience, val_fraction, warmup=None,
                     refused=None, val_refused=None, val_other: bool = False, settings: core.Settings | None = None,
                     freeze=None):
    """The tab's fields -> ``core.plan_reader`` (blank numbers automatic). ``refused``/``val_refused``: why the
    training/validation file shown was refused as a question answering file (say it, not "upload one");
    ``val_other``: a validation file is shown that was read while another task was chosen (``REUPLOAD``)."""
    if qa is None:
        raise core.DataError(refused or "Upload a question answering training file first: SQuAD JSON (1.1 or 2.0) or "
                             "a CSV with question, context, answer_text and answer_start columns (an empty "
                             "answer_text: no answer).")
    if val_refused and val_qa is None:
        raise core.DataError(val_refused.replace("Fix the file and upload it again.", "Fix the file and upload it "
                             "again, or remove it to hold out part of the training data instead."))
    if val_other and val_qa is None:
        raise core.DataError(REUPLOAD)
    if val_qa is None and _contexts(qa) < 2:
        raise core.DataError(f"Every question of {qa.name} is on one context: a reader is judged on held-out contexts. "
                             "Add questions on more contexts, or give a validation file.")
    return core.plan_reader(qa, val_qa, base=base, name=name, settings=settings,
                          **head_settings(epochs, lr, batch, seed, patience, val_fraction, warmup, freeze,
                                          epochs_example="2", patience_example="2"))


# --------------------------------------------------------------------------- a finished run
def verdict_md(r) -> str:
    """The run's verdict against always "no answer" and the fixed-position guess, as the library words it (the
    guess's reason with it: where training answers most often stand)."""
    head = "Cancelled: not judged." if r.cancelled else "Learned." if r.learned else "Not learned."
    message = r.verdict
    for lead in ("Learned: ", "Not learned: "):
        message = message.removeprefix(lead)
    return f"**{head}** {esc(r.name)} (reader): {esc(message)}"


def _pct_iv(iv) -> str:
    return f"{iv[0]:.1%}–{iv[1]:.1%}" if iv else "n/a"


def _f1_iv(iv) -> str:
    return f"{iv[0]:.3f}–{iv[1]:.3f}" if iv else "n/a"


def _lead(m: dict, key: str, guess: str, pct: bool) -> str:
    """The model's lead over a guess (its score minus the guess's) with the 95% interval of the per-question lead."""
    lead = m[key] - m["baselines"][guess][key]
    lo, hi = (m.get("margins") or {}).get(f"{key}_vs_{guess}", (None, None))
    said = f"{lead:+.1%}" if pct else f"{lead:+.3f}"
    if lo is None:
        return said
    return f"{said} ({lo:+.1%} to {hi:+.1%})" if pct else f"{said} ({lo:+.3f} to {hi:+.3f})"


def metrics_md(r, notices=()) -> str:
    """Held-out exact match and F1 with 95% intervals beside always "no answer" and the fixed-position guess (each
    with the model's lead over it and that lead's interval), the questions not answered exactly, the time; a
    cancelled run says it holds the best weights found before the cancel."""
    m = r.metrics
    iv = m.get("interval") or {}
    none, fixed = m["baselines"]["no_answer"], m["baselines"]["fixed_position"]
    first, k = fixed.get("first_word", 0), fixed.get("words", 1)
    words = f"word {first + 1}" if k == 1 else f"words {first + 1}-{first + k}"
    lines = [f"### {esc(r.name)} (reader)",
             f"**Exact match {m['exact']:.1%}** (95% interval {_pct_iv(iv.get('exact'))}) · **F1 {m['f1']:.3f}** "
             f"(95% interval {_f1_iv(iv.get('f1'))}) on {m['n']:,} held-out questions · {len(r.wrong):,} not answered "
             f"exactly · {r.seconds:.0f} s",
             "", "| answers | exact match | F1 | lead in exact match (95% interval) | lead in F1 (95% interval) |",
             "|---|---|---|---|---|", f"| this model | {m['exact']:.1%} | {m['f1']:.3f} | | |",
             f"| always \"no answer\" | {none['exact']:.1%} | {none['f1']:.3f} | "
             f"{_lead(m, 'exact', 'no_answer', True)} | {_lead(m, 'f1', 'no_answer', False)} |",
             f"| the context's {words} (fixed position: where training answers most often stand) | "
             f"{fixed['exact']:.1%} | {fixed['f1']:.3f} | {_lead(m, 'exact', 'fixed_position', True)} | "
             f"{_lead(m, 'f1', 'fixed_position', False)} |"]
    tail = ["", "SQuAD's exact match and F1 (answers normalised as the official script does); intervals: a bootstrap "
            "over the held-out questions. Learned: ahead of both guesses in exact match and in F1, each lead's 95% "
            "interval above 0."]
    if r.cancelled:
        tail.append(f"**Cancelled:** {esc(r.name)} holds the best weights found before the cancel.")
    tail += [f"Note: {esc(n)}" for n in dict.fromkeys([*notices, *r.notices])]
    tail.append(f"The model is selected in the explorer tabs as **{esc(r.name)}**.")
    return "\n".join(lines) + "\n" + "  \n".join(tail)


def wrong_rows(r) -> list[dict]:
    """The held-out questions not answered exactly, lowest F1 first, as the tab's selectable rows (mode and row
    first, as ``finetune_view.pick_row`` reads them; the question and the context as the text and second text)."""
    shown = sorted(r.wrong, key=lambda w: w.get("f1", 0.0))  # stable: the file's order on ties
    return [{"mode": READER_MODE, "row": str(w["id"]), "true": " | ".join(w["answers"]) or NO_ANSWER,
             "predicted": w["predicted"] or NO_ANSWER, "f1": round(float(w.get("f1", 0.0)), 3),
             "text": w["question"], "pair": w["context"], "run": r.name} for w in shown]


def wrong_frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame([[w["mode"], w["row"], w["text"], w["true"], w["predicted"], w["f1"], w["pair"]]
                         for w in rows], columns=["mode", "id", "question", "gold", "predicted", "F1", "context"])


def sample(r, qa) -> dict:
    """A question and its context to open the new reader on (Send to explorer): the one it answered worst (the first
    of the lowest F1), else the file's first answerable one."""
    if r.wrong:
        w = min(r.wrong, key=lambda w: w.get("f1", 0.0))
        return {"run": r.name, "text": w["question"], "pair": w["context"]}
    e = next((e for e in qa.examples if e.answers), qa.examples[0])
    return {"run": r.name, "text": e.question, "pair": e.context}
