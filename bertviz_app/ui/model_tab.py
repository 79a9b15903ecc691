"""Model tab: choose a registered model or type a Hub id / local folder; architecture,
parameter counts by component, config, labels, device and dtype."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

import bertviz_app as core
from bertviz_app.config import Settings

from . import build_panel, guards, model_loading
from .markup import esc


def build(default: str, settings: Settings) -> SimpleNamespace:
    folders = " or a local folder" if settings.allow_local_paths and not settings.public else ""
    with gr.Row():
        model = gr.Dropdown(choices=build_panel.choices(default, settings), value=default, allow_custom_value=True,
                            label="Model", info="a registered model, or type a Hub id (owner/name)" + folders,
                            elem_id="bv-model", scale=3)
        load = gr.Button("Load model", scale=1)
    # a refused load says why here and stays; the dropdown goes back to the model loaded (``loaded``)
    status = gr.Markdown(elem_id="bv-model-status")
    info = gr.Markdown(elem_id="bv-model-summary")
    table = gr.Dataframe(headers=["component", "parameters", "share"], datatype=["str", "str", "str"],
                         interactive=False,
                         label="Parameters by component")
    config = gr.JSON(label="Config")
    return SimpleNamespace(model=model, load=load, status=status, info=info, table=table, config=config,
                           loaded=gr.State(None))  # the name of the model this page shows (None: none yet)


def refused(ui: SimpleNamespace, name: str | None, loaded: str | None, exc: BaseException) -> dict:
    """A refused load: why, in the tab's status line, and the dropdown back on the model still shown (so the
    page's link, which follows the dropdown, names that one, not the refused name)."""
    still = f" The page still shows **{esc(loaded)}**." if loaded else ""
    out = {ui.status: f"{guards.refusal_md(exc)}{still}"}
    if loaded and loaded != name:
        out[ui.model] = gr.update(value=loaded)
    return out


ANSWERS = ("**Answers:** a span of the context (a start and an end logit for each of its tokens; the first token's "
           "pair is \"no answer\")")


def summary_md(s: core.ModelSummary, lm: core.LoadedModel) -> str:
    lines = [
        f"### {esc(s.name)}",
        f"**Architecture:** {esc(s.architecture)} · {s.num_layers} layers · {s.num_heads} heads · "
        f"hidden size {s.hidden_size} · reads at most {s.max_length} tokens",
        f"**Device:** {esc(lm.device_label)} · **dtype:** {esc(s.dtype)}",
        f"**Parameters:** {s.total_params:,} in all = {s.encoder_params:,} encoder "
        f"+ {s.classifier_params:,} {esc(s.head)} head outside it (the table splits both by component)",
        # a question answering model's config may name labels its span head never reads: it answers with a span
        ANSWERS if lm.head.reads == "span" else f"**Labels:** {', '.join(esc(x) for x in s.labels)}",
    ]
    if lm.warnings:
        lines.append(model_loading.warnings_md(lm))
    return "\n\n".join(lines)


def render(ui: SimpleNamespace, lm: core.LoadedModel) -> dict:
    s = core.summary(lm)
    return {
        ui.status: "",
        ui.info: summary_md(s, lm),
        ui.table: [[name, f"{n:,}", f"{n / max(s.total_params, 1):.1%}"] for name, n in s.components],
        ui.config: s.config,
    }
