"""Class probabilities for many texts: length-sorted batches, per-batch padding, inference_mode,
the attention kernel per batch length and the last layer computed for [CLS] only (``forward``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..errors import InputError
from ..results import Prediction
from .encoding import check_texts, pad_rows
from .forward import classifier_logits
from .heads import SEQUENCE_CLASSIFICATION
from .registry import LoadedModel

__all__ = ["length_batches", "pad_multiple", "CUDA_PAD_MULTIPLE", "predict", "predict_with_logits", "predict_windows",
           "probabilities", "applied_temperature", "window_plan", "window_logits", "pool_logits", "check_window",
           "WINDOW_POOLS"]

# Attention kernel "auto" (settings' predict_attention, predict's ``attention=``) uses SDPA for
# batches padded to at least SDPA_MIN_TOKENS and eager below. Measured on 2 cores (bench/): SDPA
# is 0.82x eager for a 16-token review on the default model and 1.1x at 512 tokens.
SDPA_MIN_TOKENS = 128
PREDICT_ATTENTIONS = ("auto", "eager", "sdpa")


def probabilities(lm: LoadedModel, logits: torch.Tensor, calibrated: bool = False) -> torch.Tensor:
    """Softmax for single-label models, sigmoid for multi-label ones; always float32.

    ``calibrated=True`` (what predict reports by default): a single-label model's logits are divided by
    its temperature (``lm.temperature``, from the folder's calibration.json; 1.0 when there is none)
    first. The default, False, is the model's own softmax, which the attributions explain.

    Every analysis of a text's class reads its probabilities here (predict, the attributions, faithfulness, long
    documents): a model of another head (a token classifier) is refused with an InputError naming its head."""
    lm.require_head(SEQUENCE_CLASSIFICATION, "this analysis reads the class of a whole text")
    return lm.head.decode(logits, multi_label=lm.multi_label, temperature=applied_temperature(lm, calibrated))


def applied_temperature(lm: LoadedModel, calibrated: bool = True) -> float:
    """The temperature ``probabilities(lm, ..., calibrated)`` divides the logits by (1.0: none)."""
    if not calibrated or lm.multi_label:
        return 1.0
    return float(getattr(lm, "temperature", 1.0) or 1.0)


def _options(lm: LoadedModel, attention, sort_by_length, cls_only_last_layer):
    """The speed options of one call: an argument, or the model's settings' value where it is None."""
    settings = lm.settings
    attention = settings.predict_attention if attention is None else attention
    if attention not in PREDICT_ATTENTIONS:
        raise InputError(f"attention must be one of {', '.join(PREDICT_ATTENTIONS)}, got {attention!r}.")
    sort_by_length = settings.sort_by_length if sort_by_length is None else bool(sort_by_length)
    cls_only = settings.cls_only_last_layer if cls_only_last_layer is None else bool(cls_only_last_layer)
    return attention, sort_by_length, cls_only


# On a CUDA device a batch pads to a multiple of this many tokens: attention's kernels (cuDNN's, for bf16 on
# Hopper) are planned once per input shape, and a length-sorted batch of free length is a new shape nearly every
# time (bench/gpu_results.md, an H200 in bf16: a first pass answering 300 questions 2-3x faster, predicting 512
# texts 1.36x; fp32 and repeated shapes unchanged).
CUDA_PAD_MULTIPLE = 64


def pad_multiple(lm: LoadedModel) -> int:
    """Tokens a batch's length is rounded up to: ``CUDA_PAD_MULTIPLE`` on a CUDA device, else 1 (exact)."""
    return CUDA_PAD_MULTIPLE if lm.device.type == "cuda" else 1


def length_batches(lm: LoadedModel, enc, batch_size: int, attention: str, cls_only: bool, sort_by_length: bool = True):
    """The model's logits over the tokenizer output ``enc`` in batches, as ``(rows, logits)``: ``rows`` the indices
    of ``enc``'s rows in the batch, ``logits`` (B, C) at [CLS] or (B, T, C) per position as the head reads (T the
    batch's padded width: a caller cuts each row to its own length). Rows are sorted by token count so each batch
    pads to nearly its own length (on 300 reviews, character sorting padded 34% extra tokens, this pads 9%; on a
    CUDA device to a multiple of ``pad_multiple(lm)`` tokens); ``attention`` "auto": SDPA from ``SDPA_MIN_TOKENS``
    padded tokens.
    Holds the model's run lock while the caller consumes the batches."""
    lengths = [len(ids) for ids in enc["input_ids"]]
    order = np.argsort(lengths, kind="stable") if sort_by_length else np.arange(len(lengths))
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    model = lm.predict_model()
    with lm.run_lock, torch.inference_mode():
        for start in range(0, len(lengths), batch_size):
            idx = order[start : start + batch_size]
            padded = pad_rows(lm.tokenizer, enc, idx, keys, multiple_of=pad_multiple(lm), max_width=lm.max_length)
            inputs = {k: v.to(lm.device) for k, v in padded.items()}
            impl = attention
            if impl == "auto":
                impl = "sdpa" if inputs["input_ids"].shape[1] >= SDPA_MIN_TOKENS else "eager"
            yield idx, classifier_logits(model, **inputs, attention=impl, cls_only=cls_only)


def _batched_logits(lm: LoadedModel, enc, batch_size: int, attention: str, sort_by_length: bool,
                    cls_only: bool, on_batch: Callable[[int, int], None] | None = None) -> torch.Tensor:
    """Logits (N, C) of every row of the tokenizer output ``enc``, in its order (``length_batches``).
    ``on_batch(done, total)`` after each batch."""
    n = len(enc["input_ids"])
    out = torch.zeros(n, len(lm.labels))  # (N, C)
    done = 0
    for idx, logits in length_batches(lm, enc, batch_size, attention, cls_only, sort_by_length):
        out[torch.as_tensor(idx)] = logits.float().cpu()  # (B, C)
        done += len(idx)
        if on_batch is not None:
            on_batch(done, n)
    return out


def predict(
    lm: LoadedModel,
    texts: str | list[str],
    pairs: str | list[str] | None = None,
    batch_size: int = 32,
    *,
    attention: str | None = None,
    sort_by_length: bool | None = None,
    cls_only_last_layer: bool | None = None,
    window: bool = False,
    stride: int = 128,
    pool: str = "mean",
    calibrated: bool = True,
) -> list[Prediction]:
    """Predict every text (with its pair, for sentence-pair models). Order is preserved.

    The speed options apply to this call only (None: the settings' ``predict_attention``,
    ``sort_by_length`` and ``cls_only_last_layer``); none changes the results beyond float
    rounding, and none changes the shared model, so calls with other options may run beside it.
    ``attention``: "auto" (SDPA from SDPA_MIN_TOKENS padded tokens, eager below), "eager" or "sdpa".

    ``window=True`` (opt-in): a text longer than the model reads is classified on all of its
    text, in overlapping windows (``stride`` tokens shared by neighbours) whose logits are pooled
    by ``pool`` ("mean" or "max"); see ``predict_windows``. Texts that fit give the same result.

    ``calibrated`` (default True): a single-label model whose folder holds a calibration.json reports
    ``softmax(logits / T)`` with its fitted temperature T (``lm.temperature``; the argmax never changes);
    False gives the model's raw softmax. Models without calibration.json give the same either way."""
    if window:
        return predict_windows(lm, texts, pairs, stride=stride, pool=pool, batch_size=batch_size,
                               attention=attention, sort_by_length=sort_by_length,
                               cls_only_last_layer=cls_only_last_layer, calibrated=calibrated)
    return predict_with_logits(lm, texts, pairs, batch_size, attention=attention, sort_by_length=sort_by_length,
                               cls_only_last_layer=cls_only_last_layer, calibrated=calibrated)[0]


def predict_with_logits(
    lm: LoadedModel,
    texts: str | list[str],
    pairs: str | list[str] | None = None,
    batch_size: int = 32,
    *,
    attention: str | None = None,
    sort_by_length: bool | None = None,
    cls_only_last_layer: bool | None = None,
    calibrated: bool = True,
    on_batch: Callable[[int, int], None] | None = None,
) -> tuple[list[Prediction], np.ndarray]:
    """``predict`` (no windows) and the raw logits (N, C, float32, before any temperature) its
    probabilities come from, for what needs them: temperature scaling, the NLL. ``on_batch(done,
    total)`` is called after each batch of forward passes (texts done so far); an exception raised
    in it stops the call (a cancel)."""
    lm.require_head(SEQUENCE_CLASSIFICATION, "predict classifies whole texts")
    texts, pairs = check_texts(texts, pairs, max_chars=lm.settings.max_chars,
                               max_batch_texts=lm.settings.max_batch_texts)
    if batch_size < 1:
        raise InputError("batch_size must be at least 1.")
    options = _options(lm, attention, sort_by_length, cls_only_last_layer)
    enc = lm.tokenizer(texts, pairs, truncation=True, max_length=lm.max_length)
    logits = _batched_logits(lm, enc, batch_size, *options, on_batch=on_batch)  # (N, C)
    probs = probabilities(lm, logits, calibrated=bool(calibrated)).numpy()  # (N, C)
    labels = lm.labels
    applied = applied_temperature(lm, calibrated)
    predictions = [
        Prediction(
            text=text,
            pair=pairs[i] if pairs else None,
            labels=labels,
            probs=tuple(float(x) for x in probs[i]),
            label=labels[int(probs[i].argmax())],
            truncated=bool(enc.encodings[i].overflowing),
            n_tokens=len(enc["input_ids"][i]),
            multi_label=lm.multi_label,
            temperature=applied,
        )
        for i, text in enumerate(texts)
    ]
    return predictions, logits.numpy()


# --------------------------------------------------------------------------- sliding window
WINDOW_POOLS = ("mean", "max")


def window_plan(lm: LoadedModel, texts: list[str], pairs: list[str] | None, stride: int):
    """Tokenize into overlapping windows of at most ``lm.max_length`` tokens (the second text, if
    any, is repeated in every window). -> (encoding, window -> text index, total tokens per text,
    windows per text). The encoding carries each window's ``offset_mapping`` into its own text
    (``long_documents`` places every window's tokens in the whole document by them)."""
    enc = lm.tokenizer(texts, pairs, truncation="only_first" if pairs else True, max_length=lm.max_length,
                       stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True)
    owner = list(enc["overflow_to_sample_mapping"])
    totals = [0] * len(texts)
    seen = [0] * len(texts)
    for w, i in enumerate(owner):
        seq = enc.encodings[w].sequence_ids
        first = sum(1 for s in seq if s == 0)
        if seen[i] == 0:
            totals[i] = len(seq)  # specials, the whole pair and the first window's text tokens
        else:
            totals[i] += first - stride  # a later window repeats ``stride`` text tokens
        seen[i] += 1
    return enc, owner, totals, seen


def check_window(lm: LoadedModel, stride, pool) -> None:
    """Raise InputError unless ``stride``/``pool`` are usable sliding-window options for ``lm``."""
    if pool not in WINDOW_POOLS:
        raise InputError(f"pool must be one of {', '.join(WINDOW_POOLS)}, got {pool!r}.")
    if isinstance(stride, bool) or not isinstance(stride, int) or not 0 <= stride <= lm.max_length // 2:
        raise InputError(f"stride (tokens shared by neighbouring windows) must be a whole number from 0 to "
                         f"{lm.max_length // 2}, got {stride!r}.")


def predict_windows(lm: LoadedModel, texts, pairs=None, stride: int = 128, pool: str = "mean",
                    batch_size: int = 32, *, attention: str | None = None, sort_by_length: bool | None = None,
                    cls_only_last_layer: bool | None = None, calibrated: bool = True) -> list[Prediction]:
    """Classify each text on all of its tokens: a text longer than ``lm.max_length`` is cut into
    windows of ``max_length`` tokens overlapping by ``stride`` tokens, each window is classified,
    and the windows' logits are pooled (``mean``, or ``max`` per class) before the softmax/sigmoid.
    A text that fits is one window: the same probabilities as ``predict``. The result's
    ``truncated`` is False (nothing was dropped), ``n_tokens`` counts the whole text and
    ``windows`` says how many windows were read. The speed options and ``calibrated`` are ``predict``'s
    (the temperature divides the pooled logits)."""
    lm.require_head(SEQUENCE_CLASSIFICATION, "predict classifies whole texts")
    texts, pairs = check_texts(texts, pairs, max_chars=lm.settings.max_chars,
                               max_batch_texts=lm.settings.max_batch_texts)
    check_window(lm, stride, pool)
    if batch_size < 1:
        raise InputError("batch_size must be at least 1.")
    options = _options(lm, attention, sort_by_length, cls_only_last_layer)
    enc, owner, totals, n_windows = window_plan(lm, texts, pairs, stride)
    logits = _batched_logits(lm, enc, batch_size, *options).numpy()  # (W, C)
    owner_arr = np.asarray(owner)  # (W,)
    results = []
    for i, text in enumerate(texts):
        pooled = torch.from_numpy(pool_logits(logits[owner_arr == i], pool)[None])  # (1, C)
        p = probabilities(lm, pooled, calibrated=bool(calibrated)).numpy()[0]  # (C,)
        results.append(Prediction(
            text=text, pair=pairs[i] if pairs else None, labels=lm.labels, probs=tuple(float(x) for x in p),
            label=lm.labels[int(p.argmax())], truncated=False, n_tokens=int(totals[i]), multi_label=lm.multi_label,
            windows=int(n_windows[i]), temperature=applied_temperature(lm, calibrated),
        ))
    return results


def pool_logits(rows: np.ndarray, pool: str = "mean") -> np.ndarray:
    """One text's window logits (w, C) -> its pooled logits (C,): the mean, or the max per class."""
    return rows.mean(axis=0) if pool == "mean" else rows.max(axis=0)


def window_logits(lm: LoadedModel, enc, batch_size: int = 8, *, attention: str | None = None,
                  sort_by_length: bool | None = None, cls_only_last_layer: bool | None = None) -> np.ndarray:
    """Logits (W, C) of every window of a ``window_plan`` encoding, ``batch_size`` windows per
    forward pass (inference mode), as ``predict_windows`` computes them."""
    if batch_size < 1:
        raise InputError("batch_size must be at least 1.")
    options = _options(lm, attention, sort_by_length, cls_only_last_layer)
    return _batched_logits(lm, enc, batch_size, *options).numpy()
