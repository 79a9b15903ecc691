"""Where evaluations are kept: one folder per evaluation, named, listed, reopened, owned.

    name, folder = save(ev, models_dir, owner=None)        # <models_dir>/evaluations/<name>/
    list_evaluations(models_dir, owner)                     # newest first: name, model, source, rows, accuracy
    open_evaluation(models_dir, name, owner)                # its folder (marked as opened)

A stored evaluation is ``write_evaluation``'s run folder (metrics.json, predictions.csv,
reliability.json, and whatever else the evaluation wrote: layers.json, projections...) plus two
files of its own: ``run.json`` (name, model, when, and in public mode the owner hash, as a
fine-tuned run stores it, so ``visitors.run_owner``, ``touch`` and ``last_opened`` read it the
same way) and ``slices.json`` (the spreadsheet rows of every slice, in metrics.json's order, so a
page can list a slice's rows without the model or the file).

Names are ``eval-YYYYmmdd-HHMMSS-<model slug>`` (``-2``, ``-3``... when taken), checked by a strict
pattern: a name is never a path (``../x``, ``/etc``, ``a/b`` are refused before any file is
touched). An evaluation is written into a hidden ``.tmp-`` folder and renamed into place when
whole, so a half-written one is never listed. The ``evaluations`` folder holds no ``config.json``,
so the model registry never lists it as a model.

Ownership follows the runs' rule (``bertviz_app.models.visitors``): ``owner=None`` (local mode, the CLI)
shares everything; in public mode a visitor lists and opens only their own evaluations, another
visitor's answers exactly as one that does not exist, and a visitor keeps at most ``keep_per_owner``
(the app passes ``Settings.max_evaluations_per_visitor``; saving one more removes their oldest, which
``Saved.removed`` names); ``sweep`` removes evaluations not opened for the runs' time to live, and
``visitors.delete_owner_data`` a visitor's evaluations with their runs. No gradio, no environment.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from ..errors import InputError, ModelNotFoundError
from ..models.catalog import RUN_INFO, load_run_info
from ..models.visitors import NOBODY, last_opened, run_owner, touch
from .evaluation_files import write_evaluation

__all__ = ["FOLDER", "SLICES_FILE", "KEEP_PER_OWNER", "KEEP_TOTAL", "Saved", "evaluations_dir", "is_evaluation_name",
           "check_name", "model_slug", "new_name", "save", "list_evaluations", "open_evaluation",
           "delete_evaluation", "delete_owner_evaluations", "sweep", "slice_members", "owner_evaluations"]

FOLDER = "evaluations"  # under the models folder
SLICES_FILE = "slices.json"
KEEP_PER_OWNER = 10  # public mode: a visitor's evaluations kept; one more removes their oldest
KEEP_TOTAL = 200  # public mode: visitors' evaluations kept in all; one more removes the oldest of anyone's
_NAME = re.compile(r"^eval-(\d{8})-(\d{6})-([a-z0-9]+(?:-[a-z0-9]+)*)$")
_MAX_NAME = 80
_SLUG_CHARS = 40
NAME_TOKEN_BYTES = 5  # the random part of a stored evaluation's name


@dataclass(frozen=True)
class Saved:
    """A stored evaluation: its ``name``, its ``folder`` and what saving it removed (public mode: the
    visitor's oldest evaluation past the limit)."""

    name: str
    folder: Path
    removed: tuple[str, ...] = ()


# --------------------------------------------------------------------------- names
def evaluations_dir(models_dir: str | os.PathLike) -> Path:
    return Path(models_dir) / FOLDER


def is_evaluation_name(name: object) -> bool:
    # fullmatch: the pattern's $ alone would let a trailing newline by
    return isinstance(name, str) and len(name) <= _MAX_NAME and bool(_NAME.fullmatch(name))


def check_name(name: object) -> str:
    """``name`` when it is an evaluation's name (``eval-YYYYmmdd-HHMMSS-<model>``), else InputError
    saying what a name looks like; a path is never a name."""
    if not isinstance(name, str) or not name.strip():
        raise InputError("Choose a stored evaluation (a name like eval-20250101-120000-default).")
    name = name.strip()
    if not is_evaluation_name(name):
        raise InputError(f"{name[:80]!r} is not the name of an evaluation: names look like "
                         "eval-20250101-120000-default (letters, digits and hyphens; never a folder or a path).")
    return name


def model_slug(model: str) -> str:
    """A model's name as a name part: lower-case letters, digits and hyphens ("runs/My_Run" ->
    "runs-my-run"; a folder path -> its last part), at most 40 characters; "model" when nothing is left."""
    text = str(model or "").strip().replace("\\", "/")
    if text.startswith(("/", ".", "~")):
        text = text.rstrip("/").rsplit("/", 1)[-1]
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:_SLUG_CHARS].strip("-")
    return slug or "model"


def new_name(model: str, now: datetime | None = None, token: str | None = None) -> str:
    """``eval-YYYYmmdd-HHMMSS-<model slug>-<token>`` for ``now`` (local time; default: now). ``token``
    (default: 10 random hex digits, 40 bits) keeps names from being guessed from the time and the model:
    a stored evaluation is reopened by its name, in a link."""
    now = now or datetime.now()
    return f"eval-{now:%Y%m%d-%H%M%S}-{model_slug(model)}-{token or secrets.token_hex(NAME_TOKEN_BYTES)}"


# --------------------------------------------------------------------------- slices
def slice_members(ev) -> list[list[int]]:
    """The spreadsheet rows of each of ``ev.slices`` (same order), from ``ev.slice_masks`` (the rows
    ``evaluate_file`` made each slice of): ``len(members[i]) == ev.slices[i].size``."""
    rows = np.asarray(ev.source_rows, dtype=np.int64)  # (N,)
    return [[int(r) for r in rows[np.asarray(mask, dtype=bool)]] for mask in ev.slice_masks]


# --------------------------------------------------------------------------- saving
def _folders(root: Path) -> list[Path]:
    """Stored evaluations under ``root`` (named as evaluations, whole: a run.json and a metrics.json)."""
    if not root.is_dir():
        return []
    return [p for p in root.iterdir() if p.is_dir() and is_evaluation_name(p.name)
            and (p / RUN_INFO).is_file() and (p / "metrics.json").is_file()]


def owner_evaluations(models_dir: str | os.PathLike, owner: str | None) -> list[Path]:
    """The owner's evaluation folders, oldest first (``owner=None``: every one)."""
    found = [p for p in _folders(evaluations_dir(models_dir)) if owner is None or run_owner(p) == owner]
    return sorted(found, key=_created)


def _created(path: Path) -> float:
    info = load_run_info(path) or {}
    value = info.get("created")
    return float(value) if isinstance(value, (int, float)) else path.stat().st_mtime


def save(ev, models_dir: str | os.PathLike, owner: str | None = None, *,
         write: Callable[[object, Path], object] | None = None,
         keep_per_owner: int = KEEP_PER_OWNER, keep_total: int = KEEP_TOTAL, now: datetime | None = None) -> Saved:
    """Store the evaluation ``ev``: ``write(ev, folder)`` (default ``write_evaluation``: with its layers and
    comparison when it has them), ``slices.json``, then ``run.json``; renamed into place
    once whole. Public mode (``owner`` set): stored as the owner's; past ``keep_per_owner`` their oldest
    are removed (``Saved.removed``), past ``keep_total`` the oldest of anyone's. ``owner`` NOBODY
    (a public page whose visitor is not known yet): InputError."""
    if owner == NOBODY:
        raise InputError("This page has no owner token yet: reload the page, then evaluate again.")
    if write is None:
        write = write_evaluation
    root = evaluations_dir(models_dir)
    base = new_name(ev.model, now)
    tmp = root / f".tmp-{base}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
    except OSError as exc:
        raise InputError(f"Cannot store the evaluation in the models folder's {FOLDER}/ ({exc.strerror or exc}): "
                         "the server's models folder must be writable (BERTVIZ_MODELS_DIR).") from None
    try:
        write(ev, tmp)
        members = slice_members(ev)
        (tmp / SLICES_FILE).write_text(json.dumps(
            [{"kind": s.kind, "name": s.name, "value": s.value, "column": s.column, "rows": rows}
             for s, rows in zip(ev.slices, members)]), encoding="utf-8")
        name, k = base, 2
        while True:
            info = {"kind": "evaluation", "name": name, "model": ev.model, "source": ev.source,
                    "created": time.time(), "rows": ev.rows, "accuracy": ev.accuracy,
                    "column_index": _column_index(ev)}
            if owner is not None:
                info["owner"] = owner
            (tmp / RUN_INFO).write_text(json.dumps(info), encoding="utf-8")
            try:
                os.rename(tmp, root / name)  # fails when the name is taken (a non-empty folder)
                break
            except OSError:
                if not (root / name).exists() or k > 999:
                    raise
                name, k = f"{base}-{k}", k + 1
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    removed = _prune(models_dir, owner, keep_per_owner, keep_total, keep=name)
    return Saved(name=name, folder=root / name, removed=tuple(removed))


def _column_index(ev) -> dict:
    """Where the text and second-text columns sit among predictions.csv's columns (the file's
    header cells as given may repeat or be blank; their positions do not)."""
    columns = list(ev.table.columns)
    text, _, pair = ev.columns
    return {"text": columns.index(text), "pair": None if pair is None else columns.index(pair)}


def _prune(models_dir, owner: str | None, keep_per_owner: int, keep_total: int, keep: str) -> list[str]:
    if owner is None:
        return []
    removed = []
    mine = [p for p in owner_evaluations(models_dir, owner) if p.name != keep]
    while len(mine) + 1 > keep_per_owner and mine:
        removed.append(mine[0].name)
        shutil.rmtree(mine.pop(0), ignore_errors=True)
    everyone = [p for p in owner_evaluations(models_dir, None) if run_owner(p) is not None and p.name != keep]
    while len(everyone) + 1 > keep_total and everyone:
        victim = everyone.pop(0)
        if run_owner(victim) == owner:
            removed.append(victim.name)
        shutil.rmtree(victim, ignore_errors=True)
    return removed


# --------------------------------------------------------------------------- listing and opening
def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def list_evaluations(models_dir: str | os.PathLike, owner: str | None = None) -> list[dict]:
    """The owner's stored evaluations, newest first: {"name", "model", "source", "rows", "accuracy",
    "created"} (from metrics.json, else run.json). ``owner=None``: every one."""
    out = []
    for p in reversed(owner_evaluations(models_dir, owner)):
        metrics = _read_json(p / "metrics.json")
        metrics = metrics if isinstance(metrics, dict) else {}
        info = load_run_info(p) or {}
        accuracy = metrics.get("accuracy", info.get("accuracy"))
        out.append({"name": p.name, "model": metrics.get("model", info.get("model")),
                    "source": metrics.get("source", info.get("source")), "rows": metrics.get("rows", info.get("rows")),
                    "accuracy": accuracy if isinstance(accuracy, (int, float)) else None,
                    "created": _created(p)})
    return out


def _unknown(name: str, models_dir, owner: str | None) -> ModelNotFoundError:
    yours = [e["name"] for e in list_evaluations(models_dir, owner)][:10]
    listed = ", ".join(yours) if yours else "none yet (evaluate a file in the Evaluate tab)"
    whose = "your" if owner is not None else "the stored"
    return ModelNotFoundError(
        f"No evaluation {name!r} among {whose} evaluations: it does not exist or was removed. "
        f"{whose.capitalize()} evaluations: {listed}.")


def open_evaluation(models_dir: str | os.PathLike, name: object, owner: str | None = None) -> Path:
    """The folder of the stored evaluation ``name`` (marked as opened). A malformed name: InputError;
    one that does not exist, or another visitor's: the same ModelNotFoundError."""
    name = check_name(name)
    root = evaluations_dir(models_dir)
    path = root / name
    if not path.resolve().is_relative_to(root.resolve()) or path not in _folders(root) \
            or (owner is not None and run_owner(path) != owner):
        raise _unknown(name, models_dir, owner)
    touch(path)
    return path


def delete_evaluation(models_dir: str | os.PathLike, name: object, owner: str | None = None) -> str:
    path = open_evaluation(models_dir, name, owner)
    shutil.rmtree(path, ignore_errors=True)
    return path.name


def delete_owner_evaluations(models_dir: str | os.PathLike, owner: str) -> list[str]:
    """Remove every evaluation of ``owner`` (never ``None``: that would be every one)."""
    if not owner or owner == NOBODY:
        raise InputError("There is no visitor to delete evaluations for (this page has no owner token yet: reload "
                         "it).")
    removed = []
    for path in owner_evaluations(models_dir, owner):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path.name)
    return removed


def sweep(models_dir: str | os.PathLike, ttl_s: float, now: float | None = None) -> list[str]:
    """Remove visitors' evaluations (those with an owner) not opened for ``ttl_s`` seconds, and
    half-written ``.tmp-`` folders older than that; returns the names removed."""
    now = time.time() if now is None else now
    removed = []
    for path in owner_evaluations(models_dir, None):
        if run_owner(path) is not None and now - last_opened(path) > ttl_s:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    root = evaluations_dir(models_dir)
    for path in root.glob(".tmp-*") if root.is_dir() else []:
        try:
            old = now - path.stat().st_mtime > ttl_s
        except OSError:
            continue
        if old:
            shutil.rmtree(path, ignore_errors=True)
    return removed
