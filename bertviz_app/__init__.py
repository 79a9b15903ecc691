"""bertviz_app: see inside, and adapt, BERT text classifiers.

The one public facade: the UI and the CLI import from here only. Names load on first use;
the core (torch, transformers, captum) never imports gradio or plotly.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

# Names resolve lazily (PEP 562): ``import bertviz_app`` costs nothing until an analysis is
# used, so ``bertviz_app.data``, ``--help`` and ``models`` start in a fraction of a second
# instead of paying ~5 s of torch + transformers + captum imports.
_EXPORTS = {
    "attention_maps": ("attention", "cls_rows", "mean_heads", "rollout"),
    "batching": ("predict_one", "explain_one"),
    "batch_explain": ("BATCH_METHODS", "BatchExplanation", "explain_csv"),
    "attribution": ("BASELINES", "OUTPUTS", "attribute", "attribute_many", "baseline_jumps", "cls_lens", "cls_path",
                    "recommended_baseline", "steps_mode"),
    "build_job": ("BuildStatus", "EXPECTED_BUILD_TEXT"),
    "eta": ("MEASURING", "RateEta"),
    "config": ("Settings", "get_settings"),
    "finetune": ("DEFAULT_BASE", "MODES", "FinetuneJob", "FinetunePlan", "RunResult", "Verdict",
                 "auto_config", "base_model_path", "list_runs", "load_run_info", "plan_finetune", "push_run",
                 "run_folder", "run_plan", "zip_run"),
    "data": ("read_table", "guess_columns", "review_columns", "safe_csv_cell"),
    "training": ("TrainConfig",),
    "export": ("ColourScale", "Explanation", "attribution_tokens_html", "attribution_units", "change_warning",
               "check_output_path", "colour_scale", "explanation_dict", "explanation_from_dict", "explanation_html", "explanation_json", "export_files",
               "is_signed", "per_text_scale", "tokens_html", "write_html", "write_json"),
    "faithfulness_eval": ("faithfulness", "faithfulness_many"),
    "methods": ("METHODS", "compare_methods", "explain"),
    "errors": ("BertvizError", "CancelledError", "DataError", "InputError", "ModelLoadError",
               "ModelNotFoundError", "ResourceError", "TrainingError", "LimitError"),
    "inference": ("predict",),
    "catalog": ("ENCODER", "list_models"),
    "registry": ("LoadedModel", "clear_cache", "load_model", "resolve_device"),
    "results": ("AttentionMaps", "Attribution", "ClsLens", "ClsPath", "DEFAULT_TOLERANCE", "FAITHFULNESS_TIE",
                "FIXED_N_STEPS", "Faithfulness",
                "METHOD_LABELS", "MethodComparison", "ModelSummary", "Prediction", "TokenInfo", "method_label"),
    "model_summary": ("summary",),
    "words": ("WordGroups", "merge_attention", "merge_rows", "merge_scores", "word_groups"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

# Static imports for type checkers and IDEs, which cannot follow __getattr__: they repeat
# _EXPORTS, and tests/test_packaging.py checks the two agree name for name.
if TYPE_CHECKING:
    from .attention_maps import attention, cls_rows, mean_heads, rollout
    from .attribution import (
        BASELINES,
        OUTPUTS,
        attribute,
        attribute_many,
        baseline_jumps,
        cls_lens,
        cls_path,
        recommended_baseline,
        steps_mode,
    )
    from .batch_explain import BATCH_METHODS, BatchExplanation, explain_csv
    from .batching import explain_one, predict_one
    from .build_job import EXPECTED_BUILD_TEXT, BuildStatus
    from .catalog import ENCODER, list_models
    from .config import Settings, get_settings
    from .data import guess_columns, read_table, review_columns, safe_csv_cell
    from .errors import (
        BertvizError,
        CancelledError,
        DataError,
        InputError,
        LimitError,
        ModelLoadError,
        ModelNotFoundError,
        ResourceError,
        TrainingError,
    )
    from .eta import MEASURING, RateEta
    from .export import (
        ColourScale,
        Explanation,
        attribution_tokens_html,
        attribution_units,
        change_warning,
        check_output_path,
        colour_scale,
        explanation_dict,
        explanation_from_dict,
        explanation_html,
        explanation_json,
        export_files,
        is_signed,
        per_text_scale,
        tokens_html,
        write_html,
        write_json,
    )
    from .faithfulness_eval import faithfulness, faithfulness_many
    from .finetune import (
        DEFAULT_BASE,
        MODES,
        FinetuneJob,
        FinetunePlan,
        RunResult,
        Verdict,
        auto_config,
        base_model_path,
        list_runs,
        load_run_info,
        plan_finetune,
        push_run,
        run_folder,
        run_plan,
        zip_run,
    )
    from .inference import predict
    from .methods import METHODS, compare_methods, explain
    from .model_summary import summary
    from .registry import LoadedModel, clear_cache, load_model, resolve_device
    from .results import (
        DEFAULT_TOLERANCE,
        FAITHFULNESS_TIE,
        FIXED_N_STEPS,
        METHOD_LABELS,
        AttentionMaps,
        Attribution,
        ClsLens,
        ClsPath,
        Faithfulness,
        MethodComparison,
        ModelSummary,
        Prediction,
        TokenInfo,
        method_label,
    )
    from .training import TrainConfig
    from .words import WordGroups, merge_attention, merge_rows, merge_scores, word_groups


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'bertviz_app' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))


class _Facade(types.ModuleType):
    """This package, keeping its public functions named like their module (``attention``,
    ``summary``, ``faithfulness``): importing a submodule makes the import system set
    ``bertviz_app.<submodule>``, which would replace the function with the module (``bv.rollout``
    then ``bv.attention(...)`` failed). The submodule stays in ``sys.modules``: reach it with
    ``from bertviz_app.attention import ...`` or ``importlib.import_module`` (``import
    bertviz_app.attention as m`` gives the function)."""

    def __setattr__(self, name, value):
        if isinstance(value, types.ModuleType) and _WHERE.get(name) == name:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade


__version__ = "0.1.0"

# Each public name is written once, in _EXPORTS (or below, for the functions defined here).
__all__ = [name for names in _EXPORTS.values() for name in names] + [
    "build_default", "ensure_default_model", "start_default_build", "default_build_status"]


def build_default(*args, **kwargs):
    """Build the offline default model (see ``default_model.build_default``)."""
    from .default_model import build_default as _build

    return _build(*args, **kwargs)


def ensure_default_model(progress=print) -> bool:
    """Build models/default here and now if it is missing (waits for it). Returns True when a
    build ran. The app uses ``start_default_build`` instead, which does not wait."""
    from .build_job import EXPECTED_BUILD_TEXT, build_lock
    from .config import get_settings

    models_dir = get_settings().models_dir
    path = models_dir / "default"
    if (path / "config.json").is_file():
        return False
    progress(f"The default model is not built yet; building it now ({EXPECTED_BUILD_TEXT}; once)...")
    with build_lock(models_dir):
        build_default(path, progress=progress)
    return True


def start_default_build():
    """Start building models/default in a background process unless it is built or being built;
    returns its ``BuildStatus`` at once (see ``build_job``). Call from the main thread."""
    from .build_job import start_background_build

    return start_background_build()


def default_build_status():
    """Where the default model's build stands (``BuildStatus``): built, building (progress,
    ETA, log tail), failed (why) or missing."""
    from .build_job import read_status

    return read_status()
