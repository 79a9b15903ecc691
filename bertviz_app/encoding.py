"""Validating and tokenizing untrusted text (one place for the rules every analysis shares)."""

from __future__ import annotations

import torch
from transformers import BatchEncoding

from .config import get_settings
from .errors import InputError
from .registry import LoadedModel
from .results import TokenInfo

__all__ = ["check_text", "encode", "encode_batch", "token_info"]


def check_text(text: object, what: str = "Text") -> str:
    """Return ``text`` if it can be analysed; otherwise raise InputError saying what to fix."""
    if text is None:
        raise InputError(f"{what} is empty: enter a sentence to analyse.")
    if not isinstance(text, str):
        raise InputError(f"{what} must be a string, got {type(text).__name__}.")
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.strip():
        raise InputError(f"{what} is empty or whitespace only: enter a sentence to analyse.")
    limit = get_settings().max_chars
    if len(text) > limit:
        raise InputError(
            f"{what} is {len(text):,} characters; the limit is {limit:,}. Shorten it (the model reads "
            "at most 512 tokens, about 2,000 characters of English, anyway)."
        )
    return text


def encode_batch(lm: LoadedModel, texts: list[str], pairs: list[str] | None = None) -> BatchEncoding:
    """Tokenize with truncation at the model's max length and per-batch padding (CPU tensors)."""
    return lm.tokenizer(
        texts,
        pairs,
        truncation=True,
        max_length=lm.max_length,
        padding=True,
        return_tensors="pt",
        return_offsets_mapping=True,
    )


def token_info(enc: BatchEncoding, row: int, text: str, pair: str | None) -> TokenInfo:
    mask = enc["attention_mask"][row].bool()
    n = int(mask.sum())
    tokens = enc.tokens(row)[:n]
    offsets = tuple((int(a), int(b)) for a, b in enc["offset_mapping"][row][:n].tolist())
    seq_ids = tuple(enc.sequence_ids(row)[:n])
    return TokenInfo(
        tokens=tuple(tokens),
        offsets=offsets,
        sequence_ids=seq_ids,
        text=text,
        pair=pair,
        truncated=bool(enc.encodings[row].overflowing),
    )


def encode(lm: LoadedModel, text: str, pair: str | None = None, device: torch.device | None = None):
    """One text (and optional pair) -> (model inputs on ``device``, TokenInfo)."""
    text = check_text(text)
    if pair is not None and pair.strip() == "":
        pair = None
    if pair is not None:
        pair = check_text(pair, "Second text")
    enc = encode_batch(lm, [text], [pair] if pair is not None else None)
    info = token_info(enc, 0, text, pair)
    inputs = {k: v.to(device or lm.device) for k, v in enc.items() if k != "offset_mapping"}
    return inputs, info
