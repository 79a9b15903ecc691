"""Automatic training settings (``auto_config``): blank epochs, learning rate, batch size, warm-up
and patience chosen from the data size and the encoder's width, from a proven table."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..training import TrainConfig

__all__ = ["AUTO_EVALS", "AUTO_EXAMPLES", "AUTO_LR", "AUTO_MAX_EPOCHS", "AUTO_PATIENCE", "AUTO_WARMUP", "auto_config",
           "base_hidden_size", "base_layer_count"]

# Automatic settings (``auto_config``): a proven table, not a search. Small data gets more passes
# (about AUTO_EXAMPLES examples seen, at most AUTO_MAX_EPOCHS epochs, so the cap in examples seen
# is AUTO_MAX_EPOCHS x the rows below 1,000 rows) with early stopping on the validation macro-F1 and
# loss; small encoders (MiniLM, hidden <= 384) take a larger learning rate than bert-base-sized
# ones (BERT paper's 2e-5..5e-5 for hidden 768). The cap was 10 epochs until issue 22: on 475 rows
# the validation loss rose from epoch 2 on while the training loss fell to 0.007 (bench/finetune_defaults.py).
AUTO_EXAMPLES = 5000
AUTO_MAX_EPOCHS = 5
AUTO_LR = ((384, 1e-4), (512, 5e-5), (10**9, 3e-5))  # (largest hidden size, learning rate)
AUTO_WARMUP = 0.1
AUTO_EVALS = 10  # validation evaluations per run (early stopping and best-weights selection)
AUTO_PATIENCE = 3


def base_hidden_size(base_path: Path) -> int:
    try:
        return int(json.loads((Path(base_path) / "config.json").read_text(encoding="utf-8"))["hidden_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return 768


def base_layer_count(base_path: Path) -> int | None:
    """The base's encoder layers from its config.json (DistilBERT's ``n_layers``), None when it cannot be read."""
    try:
        config = json.loads((Path(base_path) / "config.json").read_text(encoding="utf-8"))
        return int(config.get("num_hidden_layers", config.get("n_layers")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def auto_config(n_train: int, hidden_size: int = 384, *, epochs: float | None = None,
                learning_rate: float | None = None, batch_size: int | None = None,
                warmup_ratio: float | None = None, patience: int | None = None,
                max_length: int | None = None, seed: int = 42,
                freeze_layers: int = 0) -> tuple[TrainConfig, tuple[str, ...]]:
    """A TrainConfig for ``n_train`` training rows: given values are kept, blank (None) ones come
    from a proven table (see AUTO_*). Returns the config and one line per automatic choice.
    ``freeze_layers`` is never chosen: nothing is frozen unless the caller says."""
    auto: list[str] = []
    n = max(1, int(n_train))
    if batch_size is None:
        batch_size = 16 if n < 2000 else 32
        auto.append(f"batch size {batch_size} ({'small' if n < 2000 else 'larger'} data: {n:,} training rows)")
    if epochs is None:
        epochs = float(min(AUTO_MAX_EPOCHS, max(1, math.ceil(AUTO_EXAMPLES / n))))
        why = (f"small data gets at most {AUTO_MAX_EPOCHS} passes: it overfits beyond that" if epochs >= AUTO_MAX_EPOCHS
               else f"the aim is about {AUTO_EXAMPLES:,}, at least one pass")
        auto.append(f"{epochs:g} epoch{'s' if epochs != 1 else ''} at most ({int(epochs * n):,} examples seen for "
                    f"{n:,} training rows; {why}; early stopping ends it sooner)")
    if learning_rate is None:
        learning_rate = next(lr for h, lr in AUTO_LR if hidden_size <= h)
        auto.append(f"learning rate {learning_rate:g} (encoder width {hidden_size})")
    if warmup_ratio is None:
        warmup_ratio = AUTO_WARMUP
        auto.append(f"warm-up {AUTO_WARMUP:.0%} of the steps")
    steps = max(1, math.ceil(n / batch_size) * epochs)
    eval_every = max(1, math.ceil(steps / AUTO_EVALS))
    if patience is None:
        patience = AUTO_PATIENCE
        auto.append(f"early stopping after {patience} evaluations without a higher validation macro-F1, or "
                    f"{patience} without a lower validation loss, whichever comes first "
                    f"(evaluated every {eval_every} steps); the checkpoint kept is the one with the best macro-F1 "
                    "(ties: lower validation loss)")
    config = TrainConfig(epochs=float(epochs), learning_rate=float(learning_rate), batch_size=int(batch_size),
                         max_length=max_length, warmup_ratio=float(warmup_ratio), seed=int(seed),
                         eval_every=int(eval_every), early_stopping_patience=int(patience),
                         freeze_layers=int(freeze_layers),
                         logging_steps=max(1, min(50, int(steps // 30))))  # ~30 points on the loss curve
    return config, tuple(auto)
