"""The registered models on disk (``models/default``, ``models/<name>``, ``models/runs/<name>``),
without importing torch or transformers: listing them is a directory walk, so ``bertviz-app
models`` and the UI's model chooser never pay the ~5 s of ML imports for it."""

from __future__ import annotations

from pathlib import Path

from .config import get_settings

__all__ = ["ENCODER", "list_models", "model_dir"]

# The registered name of the bare pip-shipped MiniLM-L6 encoder (fresh head): the default model
# starts from it, the fine-tune tab and CLI use it as their base, and the page opens it while the
# default model builds.
ENCODER = "encoder"


def model_dir() -> Path:
    return get_settings().models_dir


def _is_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file()


def list_models() -> list[dict]:
    """Registered models: ``default`` first (built or not), then ``runs/<name>`` newest first.
    Folders being written (``.tmp-*``) or missing a config are ignored."""
    root = model_dir()
    out = [{"name": "default", "path": str(root / "default"), "built": _is_model_folder(root / "default")}]
    for sub in sorted(root.glob("*")) if root.is_dir() else []:
        if sub.name in ("default", "runs") or sub.name.startswith(".") or not _is_model_folder(sub):
            continue
        out.append({"name": sub.name, "path": str(sub), "built": True})
    runs = root / "runs"
    if runs.is_dir():
        found = [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".") and _is_model_folder(p)]
        for p in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True):
            out.append({"name": f"runs/{p.name}", "path": str(p), "built": True})
    return out
