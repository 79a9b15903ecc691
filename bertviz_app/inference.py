"""Class probabilities for many texts: length-sorted batches, per-batch padding, inference_mode,
and the last layer computed for [CLS] only."""

from __future__ import annotations

import numpy as np
import torch

from .encoding import check_texts
from .errors import InputError
from .registry import LoadedModel, attention_implementation, cls_only_last_layer
from .results import Prediction

__all__ = ["predict", "predict_windows", "probabilities", "WINDOW_POOLS"]

# Attention kernel for predictions (no maps needed): "auto" uses SDPA for batches padded to at
# least SDPA_MIN_TOKENS and eager below. Measured on 2 cores (bench/): SDPA is 0.82x eager for a
# 16-token review on the default model and 1.1x at 512 tokens. bench/ flips this to "eager"/"sdpa".
PREDICT_ATTENTION = "auto"
SDPA_MIN_TOKENS = 128
# Sort texts by token count before batching (bench/ flips it to measure what sorting is worth).
SORT_BY_LENGTH = True


def probabilities(lm: LoadedModel, logits: torch.Tensor) -> torch.Tensor:
    """Softmax for single-label models, sigmoid for multi-label ones; always float32."""
    logits = logits.float()  # (B, C)
    return torch.sigmoid(logits) if lm.multi_label else torch.softmax(logits, dim=-1)


def predict(
    lm: LoadedModel,
    texts: str | list[str],
    pairs: str | list[str] | None = None,
    batch_size: int = 32,
    window: bool = False,
    stride: int = 128,
    pool: str = "mean",
) -> list[Prediction]:
    """Predict every text (with its pair, for sentence-pair models). Order is preserved.

    ``window=True`` (opt-in): a text longer than the model reads is classified on all of its
    text, in overlapping windows (``stride`` tokens shared by neighbours) whose logits are pooled
    by ``pool`` ("mean" or "max"); see ``predict_windows``. Texts that fit give the same result."""
    if window:
        return predict_windows(lm, texts, pairs, stride=stride, pool=pool, batch_size=batch_size)
    texts, pairs = check_texts(texts, pairs)
    if batch_size < 1:
        raise InputError("batch_size must be at least 1.")

    # Tokenize everything once, then sort by token count so each batch pads to nearly its own
    # length (on 300 reviews, character-length sorting padded 34% extra tokens, this pads 9%).
    enc = lm.tokenizer(texts, pairs, truncation=True, max_length=lm.max_length)
    lengths = [len(ids) for ids in enc["input_ids"]]
    order = np.argsort(lengths, kind="stable") if SORT_BY_LENGTH else np.arange(len(texts))
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    labels = lm.labels
    results: list[Prediction | None] = [None] * len(texts)
    model = lm.predict_model()
    with lm.run_lock, torch.inference_mode(), cls_only_last_layer(model):
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            batch = lm.tokenizer.pad({k: [enc[k][i] for i in idx] for k in keys}, padding=True, return_tensors="pt")
            inputs = {k: v.to(lm.device) for k, v in batch.items()}
            impl = PREDICT_ATTENTION
            if impl == "auto":
                impl = "sdpa" if inputs["input_ids"].shape[1] >= SDPA_MIN_TOKENS else "eager"
            with attention_implementation(model, impl):
                logits = model(**inputs).logits  # (B, C)
            probs = probabilities(lm, logits).cpu().numpy()  # (B, C)
            for row, i in enumerate(idx):
                p = probs[row]
                results[i] = Prediction(
                    text=texts[i],
                    pair=pairs[i] if pairs else None,
                    labels=labels,
                    probs=tuple(float(x) for x in p),
                    label=labels[int(p.argmax())],
                    truncated=bool(enc.encodings[i].overflowing),
                    n_tokens=int(lengths[i]),
                    multi_label=lm.multi_label,
                )
    return results  # type: ignore[return-value]


# --------------------------------------------------------------------------- sliding window
WINDOW_POOLS = ("mean", "max")


def _window_plan(lm: LoadedModel, texts: list[str], pairs: list[str] | None, stride: int):
    """Tokenize into overlapping windows of at most ``lm.max_length`` tokens (the second text, if
    any, is repeated in every window). -> (encoding, window -> text index, total tokens per text)."""
    enc = lm.tokenizer(texts, pairs, truncation="only_first" if pairs else True, max_length=lm.max_length,
                       stride=stride, return_overflowing_tokens=True)
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
                    batch_size: int = 32) -> list[Prediction]:
    """Classify each text on all of its tokens: a text longer than ``lm.max_length`` is cut into
    windows of ``max_length`` tokens overlapping by ``stride`` tokens, each window is classified,
    and the windows' logits are pooled (``mean``, or ``max`` per class) before the softmax/sigmoid.
    A text that fits is one window: the same probabilities as ``predict``. The result's
    ``truncated`` is False (nothing was dropped), ``n_tokens`` counts the whole text and
    ``windows`` says how many windows were read."""
    texts, pairs = check_texts(texts, pairs)
    check_window(lm, stride, pool)
    if batch_size < 1:
        raise InputError("batch_size must be at least 1.")
    enc, owner, totals, n_windows = _window_plan(lm, texts, pairs, stride)
    lengths = [len(ids) for ids in enc["input_ids"]]
    order = np.argsort(lengths, kind="stable")
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    n_classes = len(lm.labels)
    window_logits = np.zeros((len(owner), n_classes), dtype=np.float32)  # (W, C)
    model = lm.predict_model()
    with lm.run_lock, torch.inference_mode(), cls_only_last_layer(model):
        for start in range(0, len(owner), batch_size):
            idx = order[start : start + batch_size]
            batch = lm.tokenizer.pad({k: [enc[k][i] for i in idx] for k in keys}, padding=True, return_tensors="pt")
            inputs = {k: v.to(lm.device) for k, v in batch.items()}
            impl = "sdpa" if inputs["input_ids"].shape[1] >= SDPA_MIN_TOKENS else "eager"
            with attention_implementation(model, impl):
                logits = model(**inputs).logits.float().cpu().numpy()  # (B, C)
            window_logits[idx] = logits
    owner_arr = np.asarray(owner)  # (W,)
    results = []
    for i, text in enumerate(texts):
        rows = window_logits[owner_arr == i]  # (w_i, C)
        pooled = rows.mean(axis=0) if pool == "mean" else rows.max(axis=0)  # (C,)
        p = probabilities(lm, torch.from_numpy(pooled[None])).numpy()[0]  # (C,)
        results.append(Prediction(
            text=text, pair=pairs[i] if pairs else None, labels=lm.labels, probs=tuple(float(x) for x in p),
            label=lm.labels[int(p.argmax())], truncated=False, n_tokens=int(totals[i]), multi_label=lm.multi_label,
            windows=int(n_windows[i]),
        ))
    return results
