"""bertviz_app: see inside, and adapt, BERT text classifiers.

The one public facade: the UI and the CLI import from here only. Names load on first use;
the core (torch, transformers, captum) never imports gradio or plotly.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Names resolve lazily (PEP 562): ``import bertviz_app`` costs nothing until an analysis is
# used, so ``bertviz_app.data``, ``--help`` and ``models`` start in a fraction of a second
# instead of paying ~5 s of torch + transformers + captum imports.
_EXPORTS = {
    "attention": ("attention", "cls_rows", "mean_heads", "rollout"),
    "attribution": ("BASELINES", "OUTPUTS", "attribute", "attribute_many", "cls_lens", "cls_path"),
    "config": ("Settings", "get_settings"),
    "finetune": ("DEFAULT_BASE", "ENCODER", "MODES", "FinetuneJob", "FinetunePlan", "RunResult", "Verdict",
                 "auto_config", "base_model_path", "list_runs", "load_run_info", "plan_finetune", "push_run",
                 "run_folder", "run_plan", "zip_run"),
    "data": ("read_table", "guess_columns", "review_columns", "safe_csv_cell"),
    "training": ("TrainConfig",),
    "errors": ("BertvizError", "CancelledError", "DataError", "InputError", "ModelLoadError",
               "ModelNotFoundError", "ResourceError", "TrainingError"),
    "inference": ("predict",),
    "registry": ("LoadedModel", "clear_cache", "list_models", "load_model", "resolve_device"),
    "results": ("AttentionMaps", "Attribution", "ClsLens", "ClsPath", "ModelSummary", "Prediction", "TokenInfo"),
    "summary": ("summary",),
    "words": ("WordGroups", "merge_attention", "merge_rows", "merge_scores", "word_groups"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:  # for type checkers and IDEs
    from .attention import attention, cls_rows, mean_heads, rollout  # noqa: F401
    from .attribution import BASELINES, OUTPUTS, attribute, attribute_many, cls_lens, cls_path  # noqa: F401
    from .config import Settings, get_settings  # noqa: F401
    from .data import guess_columns, read_table, review_columns, safe_csv_cell  # noqa: F401
    from .errors import (  # noqa: F401
        BertvizError, CancelledError, DataError, InputError, ModelLoadError, ModelNotFoundError, ResourceError,  # noqa: F401
        TrainingError,
    )
    from .finetune import (  # noqa: F401
        DEFAULT_BASE, ENCODER, MODES, FinetuneJob, FinetunePlan, RunResult, Verdict, auto_config, base_model_path,
        list_runs, load_run_info, plan_finetune, push_run, run_folder, run_plan, zip_run,
    )
    from .inference import predict  # noqa: F401
    from .registry import LoadedModel, clear_cache, list_models, load_model, resolve_device  # noqa: F401
    from .results import AttentionMaps, Attribution, ClsLens, ClsPath, ModelSummary, Prediction, TokenInfo  # noqa: F401
    from .summary import summary  # noqa: F401
    from .training import TrainConfig  # noqa: F401
    from .words import WordGroups, merge_attention, merge_rows, merge_scores, word_groups  # noqa: F401


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'bertviz_app' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))


__version__ = "0.1.0"

__all__ = [
    "attention", "cls_rows", "mean_heads", "rollout",
    "BASELINES", "OUTPUTS", "attribute", "attribute_many", "cls_lens", "cls_path",
    "Settings", "get_settings",
    "BertvizError", "CancelledError", "DataError", "InputError", "ModelLoadError", "ModelNotFoundError", "ResourceError",
    "TrainingError",
    "predict",
    "LoadedModel", "clear_cache", "list_models", "load_model", "resolve_device",
    "AttentionMaps", "Attribution", "ClsLens", "ClsPath", "ModelSummary", "Prediction", "TokenInfo",
    "summary",
    "WordGroups", "merge_attention", "merge_rows", "merge_scores", "word_groups",
    "build_default", "ensure_default_model",
    "DEFAULT_BASE", "ENCODER", "MODES", "FinetuneJob", "FinetunePlan", "RunResult", "Verdict", "auto_config",
    "base_model_path", "list_runs", "load_run_info", "plan_finetune", "push_run", "run_folder", "run_plan", "zip_run",
    "read_table", "guess_columns", "review_columns", "safe_csv_cell", "TrainConfig",
]


def build_default(*args, **kwargs):
    """Build the offline default model (see ``default_model.build_default``)."""
    from .default_model import build_default as _build

    return _build(*args, **kwargs)


def ensure_default_model(progress=print) -> bool:
    """Build models/default if it is missing. Returns True when a build ran."""
    from .config import get_settings

    path = get_settings().models_dir / "default"
    if (path / "config.json").is_file():
        return False
    progress("The default model is not built yet; building it now (a few minutes on a CPU, once)...")
    build_default(path, progress=progress)
    return True
