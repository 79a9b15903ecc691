"""Shareable links (issue 21): the web page's analysis view as a readable query string, and back.

``build_query(view)`` writes a ``View`` (model, text and pair, open tab, target class, the compared
attribution methods, the Attention tab's measure, layer and head, an evaluation's name) as
``model=default&text=...&tab=attention&layer=3&head=2&measure=alti&target=POSITIVE&method=ig``,
leaving out what is at its default. ``read_link(query, ...)`` is its inverse for a link someone may
have crafted: every value is checked (the model against the models this visitor may open, the text
against ``settings.max_chars``, the layer, head, target and measure against the model's numbers,
``ModelShape``), and what fails is left out of the view with one short reason each
(``Link.notice()``: "From the link: ignored model '../../etc' (not a registered model); layer 40
(the model has 6 layers: 1-6)"). Layers and heads count from 1, as the page shows them.

The text comes back as the same string (``<script>`` included): whoever shows it escapes it.
No gradio here, and nothing read from the environment: the page (``bertviz_app.ui.links``) passes
the settings, the visitor and a way to open a model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

from ..config import Settings
from ..errors import BertvizError
from ..evaluate.evaluation_runs import is_evaluation_name
from ..interpret.methods import METHOD_ALIASES, METHODS
from ..interpret.mixing_measures import MEASURES, supported_measures
from ..models.catalog import list_models
from ..models.visitors import NOBODY, check_access, is_run_name, visible
from ..results import METHOD_LABELS

__all__ = ["View", "ModelShape", "Link", "TABS", "PARAMS", "PER_LAYER_MEASURES", "MAX_QUERY_CHARS",
           "MAX_NOTICE_ITEMS", "build_query", "share_query", "read_link", "openable_models"]

# The page's tabs, by the ids the query names (``tab=``); "evaluate" is the Evaluate tab's, where it exists.
TABS = ("predict", "attention", "attributions", "model", "finetune", "batch", "evaluate")
# The parameters a link may carry, in the order ``build_query`` writes them.
PARAMS = ("model", "text", "pair", "tab", "target", "method", "measure", "layer", "head", "run")
# Measures with one matrix per layer and no heads (``MixingMaps.num_heads == 1``).
PER_LAYER_MEASURES = ("value_zeroing", "alti")
# A longer query is not offered as a link (``share_query``): servers and proxies refuse request lines past
# 8-16 KB, and such a link would not open at all. The text is left out of it instead.
MAX_QUERY_CHARS = 8000
MAX_NOTICE_ITEMS = 8  # a crafted link with a thousand bad parameters still gets one short line
_MEASURE_NAMES = {"raw": "raw attention", "norm": "attention-norm", "value_zeroing": "value zeroing", "alti": "ALTI"}
_SHORT = {full: short for short, full in METHOD_ALIASES.items()}  # integrated_gradients -> ig in a link


@dataclass(frozen=True)
class View:
    """What one link restores. ``model`` None: the page's own model; ``target`` None: the predicted
    class; ``methods`` None: the comparison's default ticks (``METHODS``); ``layer`` 1-based;
    ``head`` 1-based, None for the mean of heads (raw attention) or the whole layer (other measures);
    ``run``: a stored evaluation's name (with ``tab="evaluate"``)."""

    model: str | None = None
    text: str = ""
    pair: str = ""
    tab: str = "predict"
    target: str | None = None
    methods: tuple[str, ...] | None = None
    measure: str = "raw"
    layer: int = 1
    head: int | None = None
    run: str | None = None


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a model a link is checked against: its layers and heads, its classes, and the
    measures its family supports."""

    num_layers: int
    num_heads: int
    labels: tuple[str, ...]
    measures: tuple[str, ...] = MEASURES

    @classmethod
    def of(cls, lm) -> ModelShape:
        """The shape of a ``LoadedModel``."""
        return cls(int(lm.num_layers), int(lm.model.config.num_attention_heads), tuple(lm.labels),
                   tuple(supported_measures(lm)))


@dataclass(frozen=True)
class Link:
    """A link read: the ``view`` to restore, the parts ``ignored`` (one "what (why)" each), and
    ``given``: whether the query named anything to restore at all (a plain page load names nothing)."""

    view: View = field(default_factory=View)
    ignored: tuple[str, ...] = ()
    given: bool = False

    def notice(self) -> str:
        """One line: "From the link: ignored X (why); Y (why)", or "" when nothing was ignored; past
        ``MAX_NOTICE_ITEMS`` the rest counted ("; and 12 more"). Plain text: the page escapes it."""
        if not self.ignored:
            return ""
        shown = self.ignored[:MAX_NOTICE_ITEMS]
        more = len(self.ignored) - len(shown)
        return "From the link: ignored " + "; ".join(shown) + (f"; and {more} more" if more else "")


# --------------------------------------------------------------------------- view -> query
def build_query(view: View) -> str:
    """The query string (no "?") of ``view``: every parameter not at its default, percent-encoded
    (``/`` and ``,`` kept readable)."""
    pairs: list[tuple[str, str]] = []
    if view.model:
        pairs.append(("model", view.model))
    if view.text:
        pairs.append(("text", view.text))
    if view.pair:
        pairs.append(("pair", view.pair))
    if view.tab and view.tab != "predict":
        pairs.append(("tab", view.tab))
    if view.target:
        pairs.append(("target", view.target))
    if view.methods is not None and tuple(view.methods) != METHODS:
        pairs.append(("method", ",".join(_SHORT.get(m, m) for m in view.methods)))
    if view.measure and view.measure != "raw":
        pairs.append(("measure", view.measure))
    if view.layer and int(view.layer) != 1:
        pairs.append(("layer", str(int(view.layer))))
    if view.head is not None:
        pairs.append(("head", str(int(view.head))))
    if view.run:
        pairs.append(("run", view.run))
    return urlencode(pairs, quote_via=quote, safe="/,")


def share_query(view: View, limit: int = MAX_QUERY_CHARS) -> tuple[str, str]:
    """(query, note) for the page's link: ``build_query(view)``, or, when that is longer than ``limit``
    characters, the view without its text and pair and a note saying so (a link that long would not
    open)."""
    query = build_query(view)
    if len(query) <= limit:
        return query, ""
    query = build_query(replace(view, text="", pair=""))
    return query, (f"The text is too long for a link ({len(view.text) + len(view.pair):,} characters): the link "
                   "keeps the model and the view without it.")


# --------------------------------------------------------------------------- query -> view
def openable_models(settings: Settings, default: str, owner: str | None = None) -> list[str]:
    """The models a link may open: ``default`` and the built registered models this visitor may see
    (public mode: other visitors' runs are not among them; ``owner`` None: local mode, every model)."""
    models = [m for m in visible(list_models(settings.models_dir), owner, Path(settings.models_dir) / "runs")
              if m.get("built")]
    return list(dict.fromkeys([default, *(m["name"] for m in models)]))


def _quoted(value: str, limit: int = 40) -> str:
    """A value as a message quotes it: repr (control characters visible), cut at ``limit``."""
    s = str(value)
    return repr(s if len(s) <= limit else s[: limit - 1] + "\u2026")


def _pairs(query) -> list[tuple[str, str]]:
    if query is None:
        return []
    if isinstance(query, str):
        return parse_qsl(query.lstrip("?"), keep_blank_values=True)
    if isinstance(query, Mapping):
        items = query.multi_items() if hasattr(query, "multi_items") else query.items()
        return [(str(k), str(v)) for k, v in items]
    return [(str(k), str(v)) for k, v in query]


def _whole(value: str) -> int | None:
    """A layer or head number; None for anything else (a number of more than 9 digits too: the message then
    quotes it cut, rather than repeating thousands of digits)."""
    value = value.strip()
    if len(value) > 9:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _span(n: int, what: str) -> str:
    return f"the model has {n} {what}{'s' if n != 1 else ''}: 1-{n}" if n > 1 else f"the model has 1 {what}: 1"


@dataclass
class _Reading:
    """A link being read: its values by parameter, the ``view`` so far, and the parts ``ignored``."""

    values: dict[str, list[str]]
    ignored: list[str] = field(default_factory=list)
    view: View = field(default_factory=View)

    def one(self, key: str) -> str | None:
        """The parameter's first value (None when not given); a repeated parameter is named in ``ignored``."""
        got = self.values.get(key)
        if not got:
            return None
        if len(got) > 1:
            self.ignored.append(f"{key} given {len(got)} times (the first is read)")
        return got[0]


def _start_reading(query) -> _Reading:
    """The query's values by parameter, and each parameter that is not a link's named in ``ignored``."""
    values: dict[str, list[str]] = {}
    for key, value in _pairs(query):
        values.setdefault(key, []).append(value)
    r = _Reading(values)
    for key in values:
        if key not in PARAMS and not key.startswith("__"):  # gradio's own (?__theme=dark) are not ours
            r.ignored.append(f"parameter {_quoted(key, 24)} (links carry only {', '.join(PARAMS)})")
    return r


def _read_model(r: _Reading, settings: Settings, default: str, who: str | None) -> None:
    """``model=``: kept when this visitor may open it."""
    model = (r.one("model") or "").strip()
    if not model:
        return
    allowed = model in openable_models(settings, default, who)
    if allowed and who is not None and is_run_name(model):
        try:  # the visitor's own run, checked once more against its run.json
            check_access(model, who, Path(settings.models_dir) / "runs")
        except BertvizError:
            allowed = False
    if allowed:
        r.view = replace(r.view, model=model)
    else:
        r.ignored.append(f"model {_quoted(model)} (not a registered model)")


def _open_shape(r: _Reading, shape_of: Callable[[str], ModelShape], current: str) -> ModelShape | None:
    """The shape of the link's model, or else of the page's: None when neither opens."""
    shape = None
    if r.view.model is not None:
        try:
            shape = shape_of(r.view.model)
        except BertvizError as exc:
            r.ignored.append(f"model {_quoted(r.view.model)} (it could not be opened: {exc})")
            r.view = replace(r.view, model=None)
    if shape is None:
        try:
            shape = shape_of(current)
        except BertvizError:  # the page says why its model cannot be opened; the link's numbers wait for one
            shape = None
    return shape


def _read_texts(r: _Reading, settings: Settings) -> None:
    """``text=`` and ``pair=``: kept up to ``settings.max_chars``."""
    for key in ("text", "pair"):
        text = r.one(key)
        if text is None:
            continue
        if len(text) > settings.max_chars:
            what = "text" if key == "text" else "second text"
            r.ignored.append(f"the {what} ({len(text):,} characters; this app reads at most {settings.max_chars:,})")
        else:
            r.view = replace(r.view, **{key: text})


def _read_tab(r: _Reading, tabs: Iterable[str]) -> None:
    """``tab=``: one of the page's tabs."""
    tab = r.one("tab")
    if tab is not None:
        names = tuple(tabs)
        if tab.strip().lower() in names:
            r.view = replace(r.view, tab=tab.strip().lower())
        else:
            r.ignored.append(f"tab {_quoted(tab)} (tabs: {', '.join(names)})")


def _read_methods(r: _Reading, shape: ModelShape | None) -> None:
    """``method=`` (repeated or comma-separated): the known methods, a measure only where the family supports it."""
    methods = r.values.get("method")
    if not methods:
        return
    chosen: list[str] = []
    for raw in (m for v in methods for m in v.split(",")):
        name = raw.strip().lower().replace("-", "_")
        name = METHOD_ALIASES.get(name, name)
        if name in METHOD_LABELS and shape is not None and name in MEASURES and name not in shape.measures:
            # a context-mixing measure the model's family cannot decompose: the comparison would refuse it
            r.ignored.append(f"method {_quoted(raw.strip())} (this model's family supports only the measures "
                             f"{', '.join(shape.measures)})")
        elif name in METHOD_LABELS:
            chosen.append(name)
        elif raw.strip():
            r.ignored.append(f"method {_quoted(raw.strip())} (methods: ig, "
                             f"{', '.join(m for m in METHOD_LABELS if m != 'integrated_gradients')})")
    if chosen:
        r.view = replace(r.view, methods=tuple(dict.fromkeys(chosen)))


def _read_run(r: _Reading) -> None:
    """``run=``: an evaluation's name, read with ``tab=evaluate`` only."""
    run = r.one("run")
    if run is not None:
        if not is_evaluation_name(run):  # the store's own pattern, matched whole
            r.ignored.append(f"run {_quoted(run)} (not an evaluation's name, eval-YYYYMMDD-HHMMSS-name)")
        elif r.view.tab != "evaluate":
            r.ignored.append(f"run {_quoted(run)} (read with tab=evaluate only)")
        else:
            r.view = replace(r.view, run=run)


def _read_measure(r: _Reading, shape: ModelShape) -> None:
    """``measure=``: one the model's family supports."""
    measure = r.one("measure")
    if measure is not None:
        name = measure.strip().lower().replace("-", "_")
        if name not in MEASURES:
            r.ignored.append(f"measure {_quoted(measure)} (measures: {', '.join(MEASURES)})")
        elif name not in shape.measures:
            r.ignored.append(f"measure {_quoted(name)} (this model's family supports only {', '.join(shape.measures)})")
        else:
            r.view = replace(r.view, measure=name)


def _read_layer(r: _Reading, shape: ModelShape) -> None:
    """``layer=``: 1 to the model's number of layers."""
    layer = r.one("layer")
    if layer is not None:
        k = _whole(layer)
        if k is None:
            r.ignored.append(f"layer {_quoted(layer)} (a whole number: {_span(shape.num_layers, 'layer')})")
        elif not 1 <= k <= shape.num_layers:
            r.ignored.append(f"layer {k} ({_span(shape.num_layers, 'layer')})")
        else:
            r.view = replace(r.view, layer=k)


def _read_head(r: _Reading, shape: ModelShape) -> None:
    """``head=``: 1 to the model's number of heads (none for a per-layer measure); "mean" or "layer": the default."""
    head = r.one("head")
    if head is not None and head.strip().lower() not in ("", "mean", "layer"):
        k = _whole(head)
        heads = 1 if r.view.measure in PER_LAYER_MEASURES else shape.num_heads
        if k is None:
            r.ignored.append(f"head {_quoted(head)} (a whole number: {_span(shape.num_heads, 'head')}, or mean)")
        elif r.view.measure in PER_LAYER_MEASURES:
            r.ignored.append(f"head {k} ({_MEASURE_NAMES[r.view.measure]} is measured per layer, not per head)")
        elif not 1 <= k <= heads:
            r.ignored.append(f"head {k} ({_span(heads, 'head')})")
        else:
            r.view = replace(r.view, head=k)


def _read_target(r: _Reading, shape: ModelShape) -> None:
    """``target=``: one of the model's classes."""
    target = r.one("target")
    if target is not None and target.strip():
        if target in shape.labels:
            r.view = replace(r.view, target=target)
        else:
            r.ignored.append(f"target {_quoted(target)} (the model's classes: {', '.join(shape.labels)})")


def read_link(query, settings: Settings, default: str, shape_of: Callable[[str], ModelShape],
              current: str | None = None, owner: str | None = None, tabs: Iterable[str] = TABS) -> Link:
    """The view a link's ``query`` (a query string, a mapping, or (name, value) pairs) asks for, checked.

    ``default``: the app's model; ``current``: the model the page has open (default: ``default``), kept when
    the link names none or one that cannot be opened; ``shape_of(name)``: that model's ``ModelShape`` (it
    may load the model; a ``BertvizError`` it raises ignores the model, with its message); ``owner``: the
    visitor in public mode (``settings.public``), None locally; ``tabs``: the ids of the page's tabs.
    Each value that fails its check is left out (the view's default stands) and named in ``ignored``."""
    r = _start_reading(query)
    given = any(k in PARAMS for k in r.values)
    who = (owner or NOBODY) if settings.public else None  # public mode: no owner is nobody, never everyone
    _read_model(r, settings, default, who)
    shape = _open_shape(r, shape_of, current or default)
    _read_texts(r, settings)
    _read_tab(r, tabs)
    _read_methods(r, shape)
    _read_run(r)
    if shape is None:  # no model could be opened: its numbers cannot be checked, so none is taken
        for key in ("measure", "layer", "head", "target"):
            if r.one(key) is not None:
                r.ignored.append(f"{key} (no model could be opened to check it against)")
        return Link(r.view, tuple(r.ignored), given)
    _read_measure(r, shape)
    _read_layer(r, shape)
    _read_head(r, shape)
    _read_target(r, shape)
    return Link(r.view, tuple(r.ignored), given)
