"""The default models' background builds on the page: progress, ETA and the log's last lines,
refreshed every second by a ``gr.Timer`` while a build runs. Meanwhile the page opens the bare
encoder (``encoder``); when the default model's build finishes the Model dropdown gains ``default``
and switches to it, without a restart. The default tagger builds next (a line of its own under the
panel); when it is built the dropdown gains ``default-tagger`` and the line says so, without switching
away from what the visitor is looking at. Both stay hidden when their model was built already."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr

import bertviz_app as core
from bertviz_app.config import Settings
from bertviz_app.models.build_job import TAGGER, read_status

from . import model_loading
from .markup import esc

__all__ = ["ENCODER", "build", "wire", "start_model", "panel_md", "ready_md", "choices", "tagger_md"]

ENCODER = core.ENCODER  # the bare pip-shipped MiniLM encoder, openable while the default builds
BAR = 30


def start_model(model_name: str | None, default: str, settings: Settings) -> str:
    """What a fresh page opens: the bare encoder while the default model is not built yet."""
    name = (model_name or "").strip() or default
    if name == "default" and read_status(settings.models_dir).state != "built":
        return ENCODER
    return name


def choices(default: str, settings: Settings) -> list[str]:
    """The Model dropdown's choices: the registered models, then the bare encoder."""
    names = model_loading.model_choices(default, settings)
    return names if ENCODER in names else [*names, ENCODER]


def _bar(fraction: float) -> str:
    filled = int(round(fraction * BAR))
    return f"`{'█' * filled}{'░' * (BAR - filled)}` **{fraction:.0%}**"


def _log(status: core.BuildStatus) -> str:
    tail = "\n".join(status.log[-6:])
    return f"\n\n```text\n{tail}\n```" if tail else ""


def tagger_md(status: core.BuildStatus, announced: bool = False) -> str:
    """The default tagger's line for its build status (empty when there is nothing to say: not built and not being
    built, or built before the page opened). ``announced``: built while the page was open."""
    if status.state == "building" and status.stage == "wait":
        return ("**The default tagger** (named entities, `default-tagger`) builds next, in the background once the "
                "default model is built.")
    if status.state == "building":
        return (f"**Building the default tagger** (named entities) in the background: {_bar(status.fraction)}. "
                "Everything else works meanwhile; `default-tagger` joins the Model list when it is done, no "
                f"restart needed.{_log(status)}")
    if status.state == "failed":
        return (f"**The default tagger's build failed:** {esc(status.error or 'unknown reason')} Run "
                "`python -m bertviz_app build-default-tagger` in a terminal to see why; every other model works "
                f"meanwhile.{_log(status)}")
    if status.state == "built" and announced:
        return ("**The default tagger is ready**: choose `default-tagger` in the Model tab to see the entities of a "
                "text (its labels are spaCy's silver labels, not human annotation: its model card says how far it "
                "agrees with them).")
    return ""


def panel_md(status: core.BuildStatus) -> str:
    """The panel's text for a build status (empty when there is nothing to say)."""
    log = _log(status)
    if status.state == "building":
        eta = (f" · about **{status.eta_text}** left" if status.eta is not None else
               f" · time left: {core.MEASURING} (once training has run a little; {core.EXPECTED_BUILD_TEXT})")
        since = f" · running for {status.elapsed_text}" if status.elapsed is not None else ""
        return (f"**Building the default model** in the background: {_bar(status.fraction)}"
                f"{eta}{since}. Meanwhile the page shows the bare encoder (`encoder`, "
                "untrained head) or any model you pick; it switches to the default model when the build is done, "
                f"no restart needed.{log}")
    if status.state == "failed":
        return (f"**The default model's build failed:** {esc(status.error or 'unknown reason')} "
                f"Run `python -m bertviz_app build-default` in a terminal to see why; other models work "
                f"meanwhile.{log}")
    if status.state == "missing":
        return ("**The default model is not built.** Restart with `python app.py` to build it in the background, "
                "or run "
                "`python -m bertviz_app build-default`; the bare `encoder` and other models work meanwhile.")
    return ""


def build(default: str, settings: Settings) -> SimpleNamespace:
    """The panel (hidden unless the app's default is the default model and it is not built yet), and the default
    tagger's line under it (hidden unless its build runs or failed)."""
    built = core.BuildStatus("built")
    status = read_status(settings.models_dir) if default == "default" else built
    tagger = read_status(settings.models_dir, TAGGER) if default == "default" else built
    md = gr.Markdown(panel_md(status), visible=status.state != "built", elem_id="bv-build")
    text = tagger_md(tagger)
    tagger_line = gr.Markdown(text, visible=bool(text), elem_id="bv-build-tagger")
    timer = gr.Timer(1.0, active="building" in (status.state, tagger.state))
    # the state the page last showed: switch once, on the change to built ("known": built before the app
    # started, so there is nothing to announce)
    seen = gr.State("known" if status.state == "built" else status.state)
    seen_tagger = gr.State("known" if tagger.state == "built" else tagger.state)
    return SimpleNamespace(md=md, timer=timer, seen=seen, tagger_md=tagger_line, seen_tagger=seen_tagger)


def ready_md(selected: str | None) -> str:
    """The banner once the default model is built; it names the model the page shows now (a
    fine-tune or the Model tab may have chosen another one since)."""
    card = "its model card is `models/default/README.md`"
    selected = (selected or "").strip() or "default"
    if selected == "default":
        return f"**The default model is ready** and selected now (Model tab); {card}."
    return (f"**The default model is ready** ({card}). Selected now: **{esc(selected)}**; choose `default` "
            "in the Model tab to open the default model.")


def wire(ui: SimpleNamespace, *, demo: gr.Blocks, default: str, model_dd: gr.Dropdown, on_built: tuple,
         settings: Settings) -> None:
    """``on_built``: (fn, inputs, outputs) run once the dropdown switched to the new default model.

    The timer's tick only refreshes the panel. What follows the switch (loading the new model)
    hangs off ``seen``'s change, so it runs once, when the page switches, and not on every tick:
    a ``.then`` on the tick ran each second and, having nothing to do, answered its seven outputs
    with one value (a ValueError in the server log and a hidden Error badge, once a second)."""

    def refresh(model_name, seen, seen_tagger):
        if default != "default":  # the app opens another model: the default model's build is not its business
            return {ui.md: gr.skip(), ui.timer: gr.Timer(active=False), model_dd: gr.skip(), ui.seen: seen,
                    ui.tagger_md: gr.skip(), ui.seen_tagger: seen_tagger}
        status = read_status(settings.models_dir)
        out = {ui.seen: status.state, ui.md: gr.update(value=panel_md(status), visible=status.state != "built")}
        out.update(_tagger_refresh(model_name, seen_tagger))
        out[ui.timer] = gr.Timer(active=status.state == "building" or out[ui.seen_tagger] == "building")
        if status.state == "built" and seen in ("built", "switched", "known"):
            out[ui.seen], out[ui.md] = seen, gr.skip()  # the banner keeps naming the model selected now
        elif status.state == "built":
            switch = default == "default" and (model_name or "").strip() in ("", ENCODER, "default")
            out[ui.md] = gr.update(value=ready_md("default" if switch else model_name), visible=True)
            out[model_dd] = gr.update(choices=choices(default, settings), value="default" if switch else model_name)
            out[ui.seen] = "switched" if switch else "built"
        return out

    def _tagger_refresh(model_name, seen_tagger) -> dict:
        """The tagger's line, and the dropdown's choices once it is built (the value left as the visitor chose)."""
        tagger = read_status(settings.models_dir, TAGGER)
        if tagger.state == "built" and seen_tagger in ("known", "announced"):
            return {ui.seen_tagger: seen_tagger, ui.tagger_md: gr.skip(), model_dd: gr.skip()}
        if tagger.state == "built":
            return {ui.seen_tagger: "announced", model_dd: gr.update(choices=choices(default, settings),
                                                                    value=model_name),
                    ui.tagger_md: gr.update(value=tagger_md(tagger, announced=True), visible=True)}
        text = tagger_md(tagger)
        return {ui.seen_tagger: tagger.state, ui.tagger_md: gr.update(value=text, visible=bool(text)),
                model_dd: gr.skip()}

    fn, inputs, outputs = on_built

    def after(seen, *args):
        return fn(*args) if seen == "switched" else gr.skip()  # one skip stands for every output

    def on_model(model_name, seen):
        """A model chosen after the build (a fine-tune's run, the Model tab): the banner follows."""
        return ready_md(model_name) if seen in ("built", "switched") else gr.skip()

    watch = dict(inputs=[model_dd, ui.seen, ui.seen_tagger],
                 outputs={ui.md, ui.timer, model_dd, ui.seen, ui.tagger_md, ui.seen_tagger}, api_visibility="private",
                 show_progress="hidden", concurrency_limit=None)
    demo.load(refresh, **watch)
    ui.timer.tick(refresh, **watch)
    ui.seen.change(after, inputs=[ui.seen, *inputs], outputs=outputs, api_visibility="private", show_progress="hidden")
    model_dd.change(on_model, inputs=[model_dd, ui.seen], outputs=ui.md, api_visibility="private",
                    show_progress="hidden", queue=False)
