"""bertviz_app: see inside, and adapt, BERT text classifiers.

The one public facade: the UI and the CLI import from here only. Importing it loads torch and
transformers but never gradio or plotly.
"""

from __future__ import annotations

from .attention import attention, cls_rows, mean_heads, rollout
from .attribution import BASELINES, OUTPUTS, attribute, cls_lens, cls_path
from .config import Settings, get_settings
from .errors import (
    BertvizError,
    CancelledError,
    DataError,
    InputError,
    ModelLoadError,
    ModelNotFoundError,
    TrainingError,
)
from .inference import predict
from .registry import LoadedModel, clear_cache, list_models, load_model, resolve_device
from .results import AttentionMaps, Attribution, ClsLens, ClsPath, ModelSummary, Prediction, TokenInfo
from .summary import summary
from .words import WordGroups, merge_attention, merge_rows, merge_scores, word_groups

__version__ = "0.1.0"

__all__ = [
    "attention", "cls_rows", "mean_heads", "rollout",
    "BASELINES", "OUTPUTS", "attribute", "cls_lens", "cls_path",
    "Settings", "get_settings",
    "BertvizError", "CancelledError", "DataError", "InputError", "ModelLoadError", "ModelNotFoundError", "TrainingError",
    "predict",
    "LoadedModel", "clear_cache", "list_models", "load_model", "resolve_device",
    "AttentionMaps", "Attribution", "ClsLens", "ClsPath", "ModelSummary", "Prediction", "TokenInfo",
    "summary",
    "WordGroups", "merge_attention", "merge_rows", "merge_scores", "word_groups",
    "build_default", "ensure_default_model",
]


def build_default(*args, **kwargs):
    """Build the offline default model (see ``default_model.build_default``)."""
    from .default_model import build_default as _build

    return _build(*args, **kwargs)


def ensure_default_model(progress=print) -> bool:
    """Build models/default if it is missing. Returns True when a build ran."""
    path = get_settings().models_dir / "default"
    if (path / "config.json").is_file():
        return False
    progress("The default model is not built yet; building it now (a few minutes on a CPU, once)...")
    build_default(path, progress=progress)
    return True
