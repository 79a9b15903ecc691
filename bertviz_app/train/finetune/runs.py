"""Saved runs on disk: their names, folders (``models/runs/<name>``), saving (``save_run``), listing and zip,
and the folder a fine-tune starts from (``base_model_path``)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
from pathlib import Path

from ...errors import InputError, ModelNotFoundError, TrainingError
from ...models.catalog import DEFAULT_MODELS_DIR, RUN_INFO, list_models, load_run_info
from ...models.registry import clear_cache, model_folder
from ..training import atomic_save, check_trainable

__all__ = ["RUN_NAME", "base_model_path", "free_name", "list_runs", "run_folder", "run_stem", "runs_dir",
           "save_run", "unused_name", "valid_run_name", "zip_run"]

RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def valid_run_name(name: str) -> str:
    name = (name or "").strip()
    if not RUN_NAME.match(name) or ".." in name:
        raise InputError(f"Run name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', starting "
                         "with a letter or digit.")
    return name


def unused_name(name: str, models_dir: Path = DEFAULT_MODELS_DIR) -> str:
    """A run name the user chose, valid and not taken (runs are never overwritten)."""
    name = valid_run_name(name)
    if (runs_dir(models_dir) / name).exists():
        raise InputError(f"A run named {name!r} already exists: choose another name (runs are never overwritten).")
    return name


def base_model_path(base: str, allow_paths: bool = True, models_dir: Path = DEFAULT_MODELS_DIR) -> Path:
    """A folder with the base model's safetensors: a name registered in ``models_dir``, a folder
    (when ``allow_paths``) or a Hub id. ``encoder`` is the bare pip-shipped MiniLM-L6 encoder the
    default model starts from (unless a ``models/encoder`` folder takes the name: the registry
    resolves shipped names, as it lists them). Raises InputError for a base of a family that cannot
    be fine-tuned (``training.check_trainable``)."""
    path = model_folder(base, allow_paths=allow_paths, models_dir=models_dir)
    check_trainable(path)
    return path


def runs_dir(models_dir: Path = DEFAULT_MODELS_DIR) -> Path:
    """Where the runs of the registry ``models_dir`` are saved."""
    return Path(models_dir) / "runs"


def run_folder(run: str | None, models_dir: Path = DEFAULT_MODELS_DIR) -> Path:
    """The folder of a saved run, by its registered name ``runs/<name>`` (confined to ``models_dir``/runs)."""
    run = (run or "").strip()
    if not run.startswith("runs/"):
        raise InputError("Choose a run from the list (runs/<name>).")
    name = valid_run_name(run.split("/", 1)[1])
    path = runs_dir(models_dir) / name
    if not (path / "config.json").is_file():
        raise ModelNotFoundError(f"The run {run!r} is not saved (any more). Refresh the runs list.")
    return path


def zip_run(run: str | None, models_dir: Path = DEFAULT_MODELS_DIR) -> Path:
    """The run's model folder as a .zip in a fresh temporary folder."""
    path = run_folder(run, models_dir)
    d = tempfile.mkdtemp(prefix="bertviz-zip-")
    return Path(shutil.make_archive(os.path.join(d, path.name), "zip", root_dir=path))


def run_stem(mode: str, data_hash: str) -> str:
    """The name of a run its user did not name: ``<mode>-<data hash, 8>-<8 random hex digits>``. The random
    part keeps a run's name from being guessed from its data (names are what links and the API take)."""
    return f"{mode}-{data_hash[:8]}-{secrets.token_hex(4)}"


def free_name(stem: str, models_dir: Path = DEFAULT_MODELS_DIR) -> str:
    """``stem``, or ``stem-2``, ``stem-3``... : the first run name not taken yet."""
    runs = runs_dir(models_dir)
    name, k = stem, 2
    while (runs / name).exists():
        name, k = f"{stem}-{k}", k + 1
    return name


def save_run(model, tokenizer, dest: Path, record: dict, info: dict, card: str,
             extra_files: dict[str, str] | None = None) -> None:
    """Save a run atomically (``training.atomic_save``): the weights and tokenizer with ``run.json`` (``record``),
    the training log (``info``'s), the model card and ``extra_files``; the registry's cache cleared after."""
    files = {RUN_INFO: json.dumps(record, indent=2, default=str),
             "training_log.json": json.dumps(info.get("log_history", []), indent=2, default=str),
             "README.md": card, **(extra_files or {})}
    try:
        atomic_save(model, tokenizer, dest, files)
    except OSError as exc:
        raise TrainingError(f"Could not save the run to {dest}: {exc}. Earlier models are untouched.") from exc
    clear_cache()  # a re-used name must not serve stale weights


def list_runs(models_dir: Path = DEFAULT_MODELS_DIR) -> list[dict]:
    """Saved runs of ``models_dir`` (newest first) with their run.json; half-written folders are ignored."""
    out = []
    for m in list_models(models_dir):
        if m["name"].startswith("runs/"):
            info = load_run_info(Path(m["path"]))
            if info is not None:
                out.append(info)
    return out
