"""Models as the tabs open and name them: a visitor's request opened through the service (``load``),
the openable names a dropdown offers (``model_choices``) and the lines that describe a loaded model."""

from __future__ import annotations

from pathlib import Path

import bertviz_app as core
from bertviz_app import service
from bertviz_app.config import Settings
from bertviz_app.models.catalog import folder_head, is_model_folder

from . import visitor
from .markup import esc


def load(name: str | None, default: str, settings: Settings) -> core.LoadedModel:
    """Load what the user asked for (``service.open_model``): folder paths typed in the browser or sent
    to the API are refused unless settings.allow_local_paths; the operator's own default model is always
    allowed; in public mode another visitor's run answers as an unknown model. ``settings``: the app's."""
    return service.open_model(name, default, settings, visitor.owner())


def model_choices(default: str, settings: Settings, first: tuple[str, ...] = ()) -> list[str]:
    """The openable models (``default`` even when not built yet), each once, question answering models among them;
    ``first``: names put before them (the fine-tune tab's base: ``encoder``, which the registry lists too)."""
    models = core.list_models(settings.models_dir)
    names = [m["name"] for m in visitor.visible(models) if m["built"]]  # public mode: own runs only
    if default not in names:
        names.insert(0, default)
    return list(dict.fromkeys([*first, *names]))


def chosen_head(name: str | None, default: str, settings: Settings):
    """The head (``heads.Head``) of the model ``name`` names, for choosing how a tab reads a file: a listed model's
    from its folder's config (nothing loaded, so an upload does not wait for a model to open), any other (a folder,
    a Hub id) from the model loaded as ``load`` loads it (its refusals raised)."""
    wanted = (name or "").strip() or default
    for m in visitor.visible(core.list_models(settings.models_dir)):
        if m["name"] == wanted and m["built"] and m["path"]:
            head = folder_head(m["path"])
            if head is not None:
                return head
    return load(name, default, settings).head


def listed_head(name: str, settings: Settings):
    """The head (``heads.Head``) of a listed model or of a model folder, read from its config (nothing loaded);
    None for anything else (a Hub id, a name not listed)."""
    for m in core.list_models(settings.models_dir):
        if m["name"] == name and m["built"] and m["path"]:
            return folder_head(m["path"])
    return folder_head(name) if is_model_folder(Path(name)) else None


def model_line(lm: core.LoadedModel) -> str:
    n = len(lm.labels)
    kind = "multi-label" if lm.multi_label else "single-label"
    answers = (f"a tag per word ({n} tags)" if lm.head.reads == "every"  # a token classifier: a tagger
               else "answer spans from a context" if lm.head.reads == "span"  # question answering
               else f"{n} classes ({kind})")
    silver = " · silver-standard labels" if (core.load_run_info(lm.path) or {}).get("silver") is True else ""
    return (f"**Model:** {esc(lm.name)} · **device:** {esc(lm.device_label)} · {lm.num_layers} layers · "
            f"{answers} · reads at most {lm.max_length} tokens{silver}")


def warnings_md(lm: core.LoadedModel) -> str:
    return "\n\n".join(f"**Warning:** {esc(w)}" for w in lm.warnings)
