"""Token classification: a label for every word-piece, merged into words and entities (issue 32).

``tag(lm, texts)`` runs a ``*ForTokenClassification`` model (the token head, ``heads.TOKEN_CLASSIFICATION``) over
many texts and answers one ``Tagging`` record per text:

- per word-piece (special tokens left out): the piece, its characters in the text, its probabilities over the
  model's labels (they sum to 1) and its most probable label;
- words: the pieces of one word of the tokenizer (its ``word_ids()``) merged by an aggregation strategy, named as
  transformers' token-classification pipeline names them: "first" (the first piece's label), "average" (the
  label of the pieces' mean probabilities) or "max" (the label of the piece most sure of its own);
- entities: runs of units (pieces under "simple", words under the others) grouped as the pipeline groups them
  (``group_entities``): a unit continues the entity before it when its tag is the same and it is not a "B-" one;
  a B-/I- prefix is dropped from the entity's label; "O" runs are no entities. IO tags (a label set without
  B-/I- prefixes) read the same way: each maximal run of one label is one entity. An entity's score is the mean
  of its units' scores; its ``start``/``end`` are character offsets into the text as given, whitespace trimmed
  off both ends (DeBERTa-v2's pieces count the space before a word), so ``text[start:end]`` is its text.

Where the pipeline differs: its words come from a heuristic for tokenizers without a continuing-subword prefix
(byte-level BPE, SentencePiece: a piece continues a word when no " " is next to its start), which glues
punctuation to the word before it (RoBERTa's "Paris," is one word there, two here), joins words across a tab or a
newline, and starts a word at an unknown piece or after a lone "▁" piece inside a word; here a word is the
tokenizer's own. With WordPiece (BERT, DistilBERT, ELECTRA) and on text of words between single spaces the two are
the same, and so are the entities (the tests check it on every family). An entity of no characters (a lone "Ġ" or
"▁" piece, whose offsets are empty once trimmed) is reported by the pipeline and not here.

Long texts: with ``window=True`` (the default) a text longer than the model reads is tokenized into overlapping
windows of ``lm.max_length`` tokens that share ``stride`` tokens with their neighbours (``inference.window_plan``),
and each piece's prediction is taken from the window where it is most central (the most context on both sides,
the earlier window on a tie), so nothing is cut (``truncated`` is False). ``window=False`` cuts the text at the
model's length (``truncated`` True when something was cut).

Windows are batched across texts, sorted by length and padded per batch, one forward pass per batch through the
composed forward (``forward.classifier_logits``) in inference mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .encoding import check_texts
from .heads import TOKEN_CLASSIFICATION
from .inference import PREDICT_ATTENTIONS, applied_temperature, check_window, length_batches, window_plan
from .registry import LoadedModel

__all__ = ["tag", "Tagging", "TaggedWord", "Entity", "AGGREGATIONS", "OUTSIDE", "default_stride", "split_tag",
           "group_entities", "check_aggregation"]

AGGREGATIONS = ("simple", "first", "average", "max")
OUTSIDE = "O"  # the label of no entity


@dataclass(frozen=True)
class Entity:
    """A span of the text the model tags as one entity: ``text == source[start:end]``."""

    text: str
    label: str  # without its B-/I- prefix
    start: int
    end: int
    score: float  # the mean of its units' scores

    def to_dict(self) -> dict:
        return {"text": self.text, "label": self.label, "start": self.start, "end": self.end, "score": self.score}


@dataclass(frozen=True)
class TaggedWord:
    """One word of the tokenizer, its pieces merged by the call's aggregation ("first" under "simple")."""

    text: str
    label: str  # with its prefix, as the model names it
    score: float
    start: int
    end: int
    pieces: tuple[int, int]  # its pieces: indices [a, b) into Tagging.tokens


@dataclass(frozen=True)
class Tagging:
    """What ``tag`` answers for one text: parallel per-piece fields, then words and entities."""

    text: str
    tokens: tuple[str, ...]  # the text's word-pieces, special tokens left out
    offsets: tuple[tuple[int, int], ...]  # each piece's characters in ``text``
    labels: tuple[str, ...]  # each piece's most probable label
    probs: np.ndarray  # (P, C) float32: each piece's probabilities over ``label_names`` (rows sum to 1)
    label_names: tuple[str, ...]  # the model's labels, the columns of ``probs``
    words: tuple[TaggedWord, ...]
    entities: tuple[Entity, ...]
    aggregation: str
    truncated: bool  # the text was cut at the model's length (never with windows)
    windows: int  # windows read (1: the text fit)

    def to_dict(self) -> dict:
        """The JSON of ``bertviz-app tag --json`` and ``POST /v1/tag``."""
        return {"text": self.text, "entities": [e.to_dict() for e in self.entities], "tokens": list(self.tokens),
                "labels": list(self.labels), "truncated": self.truncated}


def default_stride(lm: LoadedModel) -> int:
    """Tokens neighbouring windows share when none is given: a quarter of the window (128 of 512)."""
    return max(0, lm.max_length // 4)


def check_aggregation(aggregation) -> str:
    if not isinstance(aggregation, str) or aggregation.lower() not in AGGREGATIONS:
        raise InputError(f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}.")
    return aggregation.lower()


def tag(lm: LoadedModel, texts: str | Sequence[str], *, aggregation: str = "simple", window: bool = True,
        stride: int | None = None, batch_size: int = 32, attention: str | None = None,
        calibrated: bool = True) -> list[Tagging]:
    """Tag every text (a string or a list; order kept) with a token classification model: see the module's
    docstring. ``aggregation``: "simple" (entities from pieces), "first", "average" or "max" (from words).
    ``window`` and ``stride`` (None: ``default_stride``): long texts in overlapping windows. ``batch_size``:
    windows per forward pass. ``attention``: "auto" (SDPA from ``SDPA_MIN_TOKENS`` padded tokens), "eager" or
    "sdpa" (None: the settings' ``predict_attention``). ``calibrated``: the probabilities (and so the scores) from
    the logits divided by the temperature a fine-tune saved in the folder's calibration.json (``lm.temperature``;
    labels unchanged); False: the raw softmax. A model of another head, an empty text or a bad option: InputError
    saying what to send."""
    lm.require_head(TOKEN_CLASSIFICATION, "tag labels every word-piece of a text")
    texts, _ = check_texts(texts, max_chars=lm.settings.max_chars, max_batch_texts=lm.settings.max_batch_texts)
    aggregation = check_aggregation(aggregation)
    stride = default_stride(lm) if stride is None else stride
    if window:
        check_window(lm, stride, "mean")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of at least 1, got {batch_size!r}.")
    attention = lm.settings.predict_attention if attention is None else attention
    if attention not in PREDICT_ATTENTIONS:
        raise InputError(f"attention must be one of {', '.join(PREDICT_ATTENTIONS)}, got {attention!r}.")
    if window:
        enc, owner, _, _ = window_plan(lm, texts, None, stride)
    else:
        enc = lm.tokenizer(texts, truncation=True, max_length=lm.max_length, return_offsets_mapping=True)
        owner = list(range(len(texts)))
    probs = window_probabilities(lm, enc, batch_size, attention, applied_temperature(lm, calibrated))
    by_text: list[list[int]] = [[] for _ in texts]
    for w, i in enumerate(owner):
        by_text[i].append(w)
    return [_tagging(lm, text, enc, by_text[i], probs, stride, aggregation,
                     truncated=not window and bool(enc.encodings[i].overflowing)) for i, text in enumerate(texts)]


def window_probabilities(lm: LoadedModel, enc, batch_size: int, attention: str = "auto",
                         temperature: float = 1.0) -> list[np.ndarray]:
    """Each row of the tokenizer output ``enc`` (a text or a window): its label probabilities (T, C) float32 at
    every position, specials included, no padding, the logits divided by ``temperature`` first. Rows are sorted by
    length and padded per batch."""
    lengths = [len(ids) for ids in enc["input_ids"]]
    out: list[np.ndarray | None] = [None] * len(lengths)
    for idx, logits in length_batches(lm, enc, batch_size, attention, cls_only=False):
        probs = lm.head.decode(logits, temperature=temperature).cpu().numpy()  # (B, T, C) float32
        for row, i in enumerate(idx):
            out[i] = probs[row, : lengths[i]]
    return out


def _pieces(enc, windows: list[int], probs: list[np.ndarray], stride: int):
    """One text's word-pieces across its windows: (tokens, offsets, word ids, probabilities (P, C)), each piece's
    probabilities from the window where it is most central. Window k + 1's first text piece is window k's
    ``stride``-th from its end (the tokenizer's overflow)."""
    tokens: list[str] = []
    offsets: list[tuple[int, int]] = []
    word_ids: list[int] = []
    rows: list[np.ndarray] = []
    best: list[int] = []
    first = 0
    for k, w in enumerate(windows):
        e = enc.encodings[w]
        # each of an Encoding's properties builds a new list when read: read once per window, not once per piece
        e_tokens, e_offsets, e_words = e.tokens, e.offsets, e.word_ids
        at = [i for i, s in enumerate(e.sequence_ids) if s == 0]  # the text's pieces in this window
        n = len(at)
        for j, i in enumerate(at):
            g, central = first + j, min(j, n - 1 - j)
            if g == len(tokens):
                tokens.append(e_tokens[i])
                offsets.append(tuple(e_offsets[i]))
                word_ids.append(e_words[i])
                rows.append(probs[w][i])
                best.append(central)
            elif central > best[g]:
                rows[g], best[g] = probs[w][i], central
        first += n - stride if k + 1 < len(windows) else 0
    p = np.stack(rows) if rows else np.zeros((0, probs[windows[0]].shape[-1]), dtype=np.float32)
    return tokens, offsets, word_ids, p


def _word_groups(word_ids: list[int]) -> list[tuple[int, int]]:
    """[a, b) piece ranges of the tokenizer's words (consecutive pieces with one word id)."""
    groups: list[tuple[int, int]] = []
    for i, w in enumerate(word_ids):
        if i and w is not None and w == word_ids[i - 1]:
            groups[-1] = (groups[-1][0], i + 1)
        else:
            groups.append((i, i + 1))
    return groups


def _merge_word(p: np.ndarray, aggregation: str) -> tuple[int, float]:
    """(label index, score) of one word from its pieces' probabilities (n, C), as the pipeline's aggregate_word."""
    if aggregation == "average":
        mean = p.mean(axis=0)  # (C,)
        k = int(mean.argmax())
        return k, float(mean[k])
    row = p[int(p.max(axis=1).argmax())] if aggregation == "max" else p[0]  # (C,)
    k = int(row.argmax())
    return k, float(row[k])


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_tag(label: str) -> tuple[str, str]:
    """("B" or "I", the tag) of a label, as the pipeline's get_tag reads it: a label without a B-/I- prefix
    (IO tags, "O") continues a run of itself."""
    if label.startswith(("B-", "I-")):
        return label[0], label[2:]
    return "I", label


def group_entities(text: str, units: Sequence[tuple[str, float, int, int]]) -> list[Entity]:
    """Entities from units (label, score, start, end) in text order: a unit joins the run before it when its tag
    is the run's and it is not a "B-"; runs of "O" and runs with no characters left once trimmed are dropped."""
    runs: list[list[tuple[str, float, int, int]]] = []
    tags: list[str] = []
    for unit in units:
        bi, tag_ = split_tag(unit[0])
        if runs and tag_ == tags[-1] and bi != "B":
            runs[-1].append(unit)
        else:
            runs.append([unit])
            tags.append(tag_)
    entities = []
    for run, tag_ in zip(runs, tags):
        start, end = _trim(text, run[0][2], run[-1][3])
        if tag_ == OUTSIDE or end <= start:
            continue
        score = float(np.mean([u[1] for u in run]))
        entities.append(Entity(text=text[start:end], label=tag_, start=start, end=end, score=score))
    return entities


def _tagging(lm: LoadedModel, text: str, enc, windows: list[int], probs: list[np.ndarray], stride: int,
             aggregation: str, truncated: bool) -> Tagging:
    tokens, offsets, word_ids, p = _pieces(enc, windows, probs, stride)
    names = lm.labels
    best = p.argmax(axis=1) if len(p) else np.zeros(0, dtype=int)  # (P,)
    words = []
    for a, b in _word_groups(word_ids):
        k, score = _merge_word(p[a:b], "first" if aggregation == "simple" else aggregation)
        start, end = _trim(text, offsets[a][0], offsets[b - 1][1])
        words.append(TaggedWord(text=text[start:end], label=names[k], score=score, start=start, end=end,
                                pieces=(a, b)))
    if aggregation == "simple":
        units = [(names[int(k)], float(p[i, k]), offsets[i][0], offsets[i][1]) for i, k in enumerate(best)]
    else:
        units = [(w.label, w.score, offsets[w.pieces[0]][0], offsets[w.pieces[1] - 1][1]) for w in words]
    p.flags.writeable = False
    return Tagging(text=text, tokens=tuple(tokens), offsets=tuple(offsets), labels=tuple(names[int(k)] for k in best),
                   probs=p, label_names=names, words=tuple(words), entities=tuple(group_entities(text, units)),
                   aggregation=aggregation, truncated=truncated, windows=len(windows))
