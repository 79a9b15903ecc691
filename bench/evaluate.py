"""Small evaluation helpers the bench scripts share (the same code scores ours and the peer)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["predict_labels", "hidden_size"]


def predict_labels(model, tokenizer, texts: list[str], max_length: int, batch_size: int = 64) -> list[int]:
    """The argmax class of every text, in order (batches of similar length, inference mode)."""
    import torch

    order = np.argsort([len(t) for t in texts])
    out = np.empty(len(texts), dtype=int)
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            enc = tokenizer([texts[i] for i in idx], truncation=True, max_length=max_length, padding=True,
                            return_tensors="pt")
            enc = {k: v.to(model.device) for k, v in enc.items()}
            out[idx] = model(**enc).logits.argmax(-1).cpu().numpy()  # (B,)
    return out.tolist()


def hidden_size(base_path: str | Path, default: int = 768) -> int:
    """The hidden size in a model folder's config.json (``default`` where it cannot be read)."""
    try:
        return int(json.loads((Path(base_path) / "config.json").read_text(encoding="utf-8"))["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return default
