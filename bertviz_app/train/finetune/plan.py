"""``plan_finetune``: everything a run needs, checked before any training (table, columns, the
validation report, datasets, base model, run names, settings)."""

from __future__ import annotations

import os
from pathlib import Path

from ...config import Settings
from ...errors import DataError, InputError
from ..data import (
    Table,
    build_dataset,
    choose_columns,
    describe_columns,
    guess_columns,
    holds_numbers,
    read_table,
    review_columns,
    validation_dataset,
)
from ..training import TrainConfig
from .auto import auto_config, base_hidden_size, base_layer_count
from .records import DEFAULT_BASE, MODES, FinetunePlan
from .runs import base_model_path, runs_dir, valid_run_name

__all__ = ["check_val_fraction", "plan_base", "plan_finetune", "plan_settings", "run_names", "val_columns"]


def val_columns(val_table: Table, text: str, label: str, pair: str | None) -> tuple[str, str, str | None, list[str]]:
    """The validation file's (text, label, pair) columns and a notice: the training file's names when
    it has them, else guessed."""
    cols = set(val_table.columns)
    if {text, label} <= cols and (not pair or pair in cols):
        vt, vl, vp, notes = text, label, pair, []
    else:
        g = guess_columns(val_table)  # the validation file names its columns differently: guess them
        vt, vl, vp = g.text, g.label, g.pair if pair else None
        if vt is None or vl is None or (pair and vp is None):
            raise DataError(f"The validation file {val_table.name!r} lacks the columns {text!r} and {label!r}"
                            + (f" and {pair!r}" if pair else "")
                            + f" and they could not be guessed (found {describe_columns(val_table)}): give it the "
                            "same header as the training file.")
        notes = [f"validation file columns guessed: text {vt!r}, label {vl!r}" + (f", pair {vp!r}" if vp else "")]
    for col, what in ((vt, "text"), (vp, "second text")):
        if col and holds_numbers(val_table, col):  # the same header, but ids or scores where the texts should be
            raise DataError(f"The validation file {val_table.name!r} has numbers, not texts, in its {what} column "
                            f"{col!r} (found {describe_columns(val_table)}): put the validation texts in that "
                            "column.")
    return vt, vl, vp, notes


def plan_finetune(
    table: Table | str | os.PathLike,
    *,
    text_column: str | None = None,
    label_column: str | None = None,
    pair_column: str | None = None,
    multi_label: bool = False,
    val_table: Table | str | os.PathLike | None = None,
    base: str | None = None,
    mode: str = "full",
    name: str | None = None,
    epochs: float | None = None,
    learning_rate: float | None = None,
    batch_size: int | None = None,
    warmup_ratio: float | None = None,
    max_length: int | None = None,
    seed: int = 42,
    patience: int | None = None,
    val_fraction: float = 0.2,
    allow_paths: bool | None = None,
    settings: Settings | None = None,
    world_size: int = 1,
    freeze_layers: int | None = None,
) -> FinetunePlan:
    """Check everything a run needs before any training: the table (read from a path if need be),
    the columns (guessed when not given), the validation report (errors raise DataError with the
    fix), the datasets, the base model (downloaded if a Hub id), the run names and the settings
    (blank ones automatic).

    ``settings`` (default: ``Settings()``) gives the upload and data limits, the models folder runs
    are saved in, the probe's device and, unless ``allow_paths`` says, whether ``base`` may be a
    folder (``allow_local_paths``). ``world_size``: processes training together (``accelerate
    launch``; the CLI reads it from torchrun's WORLD_SIZE)."""
    settings = settings if settings is not None else Settings()
    if mode not in MODES:
        raise InputError(f"Unknown mode {mode!r}: choose full, probe or both.")
    check_val_fraction(val_fraction)
    limits = dict(max_upload_mb=settings.max_upload_mb, max_rows=settings.max_rows)
    if not isinstance(table, Table):
        table = read_table(table, **limits)
    notices: list[str] = list(table.notices)
    text, label, guessed = choose_columns(table, text_column, label_column)
    pair = pair_column or None
    if guessed:
        notices.append(guessed)
    report = review_columns(table, text, label, pair, multi_label, settings=settings)
    report.raise_if_blocking()
    train = build_dataset(table, text, label, pair, bool(multi_label), settings=settings)
    val = None
    if val_table is not None:
        if not isinstance(val_table, Table):
            val_table = read_table(val_table, **limits)
        notices += [f"validation file: {n}" for n in val_table.notices]
        vt, vl, vp, guessed = val_columns(val_table, text, label, pair)
        notices += guessed
        val, val_notices = validation_dataset(train, val_table, vt, vl, vp, max_chars=settings.max_chars)
        notices += list(val_notices)
    base, base_path, allow = plan_base(base, allow_paths, settings)
    modes = ("probe", "full") if mode == "both" else (mode,)
    names = run_names(name, modes, settings.models_dir)
    n_train = len(train) if val is not None else max(1, int(len(train) * (1 - float(val_fraction))))
    config, auto, given = plan_settings(n_train, base_path, epochs=epochs, learning_rate=learning_rate,
                                        batch_size=batch_size, warmup_ratio=warmup_ratio, patience=patience,
                                        max_length=max_length or None, seed=seed, freeze_layers=freeze_layers)
    return FinetunePlan(train=train, val=val, base=base, modes=modes, names=names, config=config,
                        val_fraction=float(val_fraction), source=table.name or "", columns=(text, label, pair),
                        notices=tuple(notices), warnings=tuple(p.message for p in report.warnings), auto=auto,
                        given=given,
                        allow_paths=allow, models_dir=Path(settings.models_dir), device=settings.device,
                        world_size=int(world_size))


def check_val_fraction(val_fraction: float) -> None:
    """InputError unless the share of the training data held out to judge a run is from 0.05 to 0.5."""
    if not 0.05 <= float(val_fraction) <= 0.5:
        raise InputError(f"The validation fraction must be between 0.05 and 0.5 (got {val_fraction}).")


def plan_base(base: str | None, allow_paths: bool | None, settings: Settings) -> tuple[str, Path, bool]:
    """(base, its folder, whether a folder may be a base): the base named (blank: ``DEFAULT_BASE``) found in
    ``settings.models_dir``, as a folder when ``allow_paths`` says (None: ``settings.allow_local_paths``) or on the
    Hub, and one that can be fine-tuned (``base_model_path``)."""
    allow = settings.allow_local_paths if allow_paths is None else bool(allow_paths)
    base = (base or "").strip() or DEFAULT_BASE
    return base, base_model_path(base, allow_paths=allow, models_dir=settings.models_dir), allow


def plan_settings(n_train: int, base_path: Path, *, epochs: float | None, learning_rate: float | None,
                  batch_size: int | None, warmup_ratio: float | None, patience: int | None, seed: int,
                  max_length: int | None = None,
                  freeze_layers: int | None = None) -> tuple[TrainConfig, tuple[str, ...], tuple[str, ...]]:
    """(config, auto, given): ``auto_config``'s settings for ``n_train`` training examples on ``base_path``'s
    encoder with the lines saying why of each chosen automatically (given as None), and the names of the
    ``TrainConfig`` fields the user gave. ``freeze_layers`` (None or 0: nothing frozen) must leave the base's top
    layer to train."""
    check_freeze_layers(freeze_layers or 0, base_path)
    config, auto = auto_config(n_train, base_hidden_size(base_path), epochs=epochs, learning_rate=learning_rate,
                               batch_size=batch_size, warmup_ratio=warmup_ratio, patience=patience,
                               max_length=max_length, seed=seed, freeze_layers=freeze_layers or 0)
    given = tuple(k for k, v in (("epochs", epochs), ("learning_rate", learning_rate), ("batch_size", batch_size),
                                 ("warmup_ratio", warmup_ratio), ("early_stopping_patience", patience),
                                 ("max_length", max_length), ("freeze_layers", freeze_layers or None))
                  if v is not None)
    return config, auto, given


def check_freeze_layers(freeze_layers: int, base_path: Path) -> None:
    """InputError unless ``freeze_layers`` is a whole number from 0 to the base's layers minus one (the top layer has
    to train), before any training."""
    layers = base_layer_count(base_path)
    if not isinstance(freeze_layers, int) or freeze_layers < 0 or (layers is not None and freeze_layers >= layers):
        most = f"{layers - 1} (the base has {layers} layers; the top one has to train)" if layers else "the layers - 1"
        raise InputError(f"Frozen layers must be a whole number from 0 to {most}, got {freeze_layers!r}.")


def run_names(name: str | None, modes: tuple[str, ...], models_dir: Path) -> tuple[str | None, ...]:
    """One run name per mode (None: automatic); "both" adds -probe and -full to a given name.
    A name already taken in ``models_dir`` raises InputError (runs are never overwritten)."""
    name = (name or "").strip()
    names: tuple[str | None, ...] = (
        (None,) * len(modes) if not name
        else (valid_run_name(name),) if len(modes) == 1
        else tuple(valid_run_name(f"{name}-{m}") for m in modes)
    )
    for n in names:
        if n is not None and (runs_dir(models_dir) / n).exists():
            raise InputError(f"A run named {n!r} already exists: choose another name (runs are never overwritten).")
    return names
