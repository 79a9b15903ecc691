"""Plotly figures from the core's result arrays. numpy + plotly only: never imports torch.

Every function takes plain arrays and token strings (so the UI can merge word pieces or drop
[CLS]/[SEP] before plotting) and returns a ``plotly.graph_objects.Figure``.

Untrusted text: plotly renders tick labels, titles and hover text as a small HTML subset, so
every token is passed through ``html.escape`` before it reaches a figure (``_esc``).
Token axes are categorical with one unique category per position ("the · 3"), shown with the
bare token as tick text: repeated tokens ("the" twice) stay separate rows instead of being
merged, and the hover names the token without a per-cell payload.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

__all__ = [
    "MAX_COLUMNS",
    "OVERVIEW_MAX_TOKENS",
    "bin_columns",
    "column_bins",
    "layer_overview",
    "attention_heatmap",
    "attention_overview",
    "cls_rows_heatmap",
    "rollout_heatmap",
    "prob_bar",
    "attribution_bar",
    "cls_path_heatmap",
    "cls_lens_chart",
    "methods_heatmap",
    "agreement_heatmap",
    "training_curves",
    "confusion_matrices",
    "empty_figure",
    "pool_matrix",
    "new_figure",
    "finish",
    "escape",
]

OVERVIEW_MAX_TOKENS = 32  # each small multiple is pooled down to at most this many tokens per side
MAX_COLUMNS = 256  # columns a whole document's token-axis chart draws: ~4 px each in a ~1,100-px chart
RED, GREEN, GREY = "#d62728", "#2ca02c", "#9e9e9e"
DIVERGING = [[0.0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#7fbf7b"], [1.0, "#1b7837"]]
_FONT = dict(family="Inter, Arial, sans-serif", size=12)


def _light_template() -> dict:
    """The parts of plotly_white these charts use. The full template carries defaults for every
    trace type (maps, 3-D scenes...), and copying it into each figure cost ~30-130 ms a figure:
    most of the time Analyze spent drawing charts."""
    import plotly.io as pio

    layout = pio.templates["plotly_white"].layout.to_plotly_json()
    keep = ("xaxis", "yaxis", "paper_bgcolor", "plot_bgcolor", "colorway", "colorscale", "font", "hoverlabel",
            "hovermode", "annotationdefaults")
    return {"layout": {k: layout[k] for k in keep if k in layout}}


_TEMPLATE = _light_template()


def _figure(*traces) -> go.Figure:
    """A figure on the light template from the start: ``go.Figure(trace)`` would first copy
    plotly's full default template into it (and keep it in the JSON), ~70 ms a figure."""
    return go.Figure(data=list(traces), layout={"template": _TEMPLATE})


def _esc(text: object, limit: int = 40) -> str:
    s = str(text)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return html.escape(s, quote=True)


def _labels(tokens: Sequence[str]) -> list[str]:
    return [_esc(t) for t in tokens]


def file_name(text: str, limit: int = 80) -> str:
    """A download's file name (no suffix) from a title: "Layer 3, head 2" -> "layer3_head2"."""
    s = re.sub(r"\b([a-z]+) (\d+)\b", r"\1\2", str(text).lower())  # "layer 3" -> "layer3"
    return re.sub(r"[^a-z0-9]+", "_", s).strip("_")[:limit].rstrip("_") or "figure"


def _layout(fig: go.Figure, title: str, height: int, download: str | None = None, **kw) -> go.Figure:
    """Title, size, margins and font; ``download``: the file name its SVG/PNG download gets
    (``layout.meta.download``, read by ``ui.figures``), default made from the title."""
    fig.update_layout(
        title=dict(text=_esc(title, 200), x=0.01, xanchor="left"),
        height=height,
        margin=dict(l=10, r=10, t=50, b=10),
        font=_FONT,
        meta=dict(download=download or file_name(title)),
        **kw,
    )
    return fig


def empty_figure(message: str = "Run Analyze to see this chart.") -> go.Figure:
    fig = _figure()
    fig.add_annotation(text=_esc(message, 200), showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _layout(fig, "", 200)


def _axis_size(n: int) -> int:
    return int(min(900, max(360, 22 * n)))


def _cats(tokens: Sequence[str]) -> list[str]:
    """One unique, escaped category per position: "film · 3"."""
    return [f"{lab} · {i}" for i, lab in enumerate(_labels(tokens))]


def _tick_kw(tokens: Sequence[str], cats: Sequence[str] | None = None) -> dict:
    """A categorical token axis with at most ~96 tick labels (the rest in the hover); ``cats``: the
    axis's categories, default one per position (``_cats``)."""
    n = len(tokens)
    step = max(1, int(np.ceil(n / 96)))  # at most ~96 labels per axis; the rest in the hover
    idx = list(range(0, n, step))
    labels, cats = _labels(tokens), cats if cats is not None else _cats(tokens)
    return dict(type="category", tickmode="array", tickvals=[cats[i] for i in idx], ticktext=[labels[i] for i in idx],
                tickfont=dict(size=10 if n > 40 else 12))


def _top(z: np.ndarray) -> float:
    """The top of a 0-based colour scale: the largest weight (plotly ignores ``zmin`` without ``zmax``
    and would stretch the data's own range over the whole scale, so weights of 0.062 and 0.063 would
    look like white and dark blue)."""
    top = float(np.nanmax(z)) if z.size else 0.0
    return top if top > 0 else 1.0


def attention_heatmap(matrix: np.ndarray, tokens: Sequence[str], title: str = "Attention",
                      download: str | None = None) -> go.Figure:
    """(T, T) attention: row = the token attending (query), column = the token attended to (key).
    ``download``: the figure's file name, default "attention_" + the title's (attention_layer3_head2)."""
    z = np.asarray(matrix, dtype=np.float32)  # (T, T)
    n = len(tokens)
    if z.shape != (n, n):
        raise ValueError(f"matrix shape {z.shape} does not match {n} tokens")
    cats = _cats(tokens)
    fig = _figure(go.Heatmap(
        z=np.round(z, 4), x=cats, y=cats, colorscale="Blues", zmin=0.0, zmax=_top(z),
        colorbar=dict(title=dict(text="weight"), thickness=12),
        hovertemplate="%{y} → %{x}<br>weight %{z:.3f}<extra></extra>",
    ))
    fig.update_xaxes(title_text="attended to (key)", side="bottom", tickangle=-60, **_tick_kw(tokens))
    fig.update_yaxes(title_text="attending (query)", autorange="reversed", **_tick_kw(tokens))
    fig.update_yaxes(scaleanchor="x", scaleratio=1, constrain="domain")  # square cells
    fig.update_xaxes(constrain="domain")
    name = file_name(title)
    return _layout(fig, title, _axis_size(n) + 120,
                   download=download or (name if name.startswith("attention") else f"attention_{name}"))


def pool_matrix(matrix: np.ndarray, tokens: Sequence[str], max_tokens: int) -> tuple[np.ndarray, list[str]]:
    """Average-pool the last two axes of (..., T, T) into at most ``max_tokens`` blocks per side.
    Block labels are "first…last" token. Rows of the result still sum to ~1 after re-scaling."""
    n = len(tokens)
    if n <= max_tokens:
        return matrix, list(tokens)
    edges = np.linspace(0, n, max_tokens + 1).round().astype(int)
    blocks = [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    rows = np.stack([matrix[..., a:b, :].mean(axis=-2) for a, b in blocks], axis=-2)  # (..., B, T)
    pooled = np.stack([rows[..., a:b].sum(axis=-1) for a, b in blocks], axis=-1)  # (..., B, B)
    labels = [tokens[a] if b - a == 1 else f"{tokens[a]}…{tokens[b - 1]}" for a, b in blocks]
    return pooled, labels


def _tiles(weights, tokens: Sequence[str], max_tokens: int, pick: str):
    """An overview's tiles: ``weights`` (..., T, T) pooled to at most ``max_tokens`` blocks per side, each
    tile also divided by its own maximum (its own colour scale). Returns (pooled, normalised, block
    labels, notice or None: what the pooling did, and that picking ``pick`` above shows every token)."""
    pooled, labels = pool_matrix(np.asarray(weights, dtype=np.float32), list(tokens), max_tokens)
    notice = None
    if len(labels) < len(tokens):
        notice = (f"The overview pools {len(tokens)} tokens into {len(labels)} blocks per side so it stays "
                  f"readable; pick {pick} above to see every token.")
    tile_max = pooled.max(axis=(-2, -1), keepdims=True)
    return pooled, pooled / np.where(tile_max > 0, tile_max, 1.0), labels, notice


def attention_overview(
    weights: np.ndarray, tokens: Sequence[str], max_tokens: int = OVERVIEW_MAX_TOKENS
) -> tuple[go.Figure, str | None]:
    """Small multiples of every layer x head, (L, H, T, T). Returns (figure, notice or None);
    inputs longer than ``max_tokens`` are pooled into blocks and the notice says so."""
    n_layers, n_heads = np.shape(weights)[:2]  # (L, H, T, T)
    pooled, norm, labels, notice = _tiles(weights, tokens, max_tokens, "a layer and head")  # (L, H, B, B)
    # One heatmap trace tiled with one-cell gaps, not L x H subplots: plotly builds 144 axes and 72
    # traces in ~0.9 s (most of what Analyze spent beyond the model), one trace in ~20 ms.
    # Each tile keeps its own colour scale (z = weight / tile maximum, as each subplot had its own
    # zmax); the hover shows the real weight (customdata) and names layer, head and tokens through
    # unique categories ("L3 · film · 2"), so no per-cell text is sent.
    b = len(labels)
    step = b + 1  # a tile and its gap
    z = np.full((n_layers * step - 1, n_heads * step - 1), np.nan, dtype=np.float32)
    raw = np.full_like(z, np.nan)
    for layer in range(n_layers):
        for head in range(n_heads):
            r, c = layer * step, head * step
            z[r : r + b, c : c + b] = norm[layer, head]
            raw[r : r + b, c : c + b] = pooled[layer, head]
    toks = _labels(labels)
    xs = [f"H{h + 1} · {t} · {j}" if j < b else f"gap {h + 1}"
          for h in range(n_heads) for j, t in enumerate([*toks, ""])]
    ys = [f"L{la + 1} · {t} · {i}" if i < b else f"gap {la + 1}"
          for la in range(n_layers) for i, t in enumerate([*toks, ""])]
    xs, ys = xs[:-1], ys[:-1]  # no gap after the last tile
    mid = b // 2
    fig = _figure(go.Heatmap(
        z=np.round(z, 3), customdata=np.round(raw, 3), x=xs, y=ys, colorscale="Blues", zmin=0.0, zmax=1.0,
        showscale=False, hoverongaps=False,
        hovertemplate="%{y} → %{x}<br>weight %{customdata:.3f}<extra></extra>",
    ))
    fig.update_xaxes(type="category", tickmode="array", tickvals=[xs[h * step + mid] for h in range(n_heads)],
                     ticktext=[f"H{h + 1}" for h in range(n_heads)], side="bottom", ticks="", showgrid=False)
    fig.update_yaxes(type="category", tickmode="array", tickvals=[ys[la * step + mid] for la in range(n_layers)],
                     ticktext=[f"L{la + 1}" for la in range(n_layers)], autorange="reversed", ticks="", showgrid=False)
    cell = 70 if n_heads <= 12 else 50
    return _layout(fig, "All layers × heads (rows: layers, columns: heads; each tile on its own colour scale)",
                   80 + cell * n_layers, download="attention_overview"), notice


def layer_overview(weights: np.ndarray, tokens: Sequence[str], title: str = "All layers",
                   max_tokens: int = OVERVIEW_MAX_TOKENS, download: str = "overview_by_layer",
                   ) -> tuple[go.Figure, str | None]:
    """Small multiples of a measure without heads, (L, T, T): one square tile per layer, side by side and
    labelled by layer, each on its own colour scale (as ``attention_overview``'s). Returns (figure, notice
    or None); inputs longer than ``max_tokens`` are pooled into blocks and the notice says so."""
    n_layers = np.shape(weights)[0]  # (L, T, T)
    pooled, norm, labels, notice = _tiles(weights, tokens, max_tokens, "a layer")  # (L, B, B)
    b = len(labels)
    step = b + 1  # a tile and its gap
    z = np.full((b, n_layers * step - 1), np.nan, dtype=np.float32)
    raw = np.full_like(z, np.nan)
    for layer in range(n_layers):
        z[:, layer * step: layer * step + b] = norm[layer]
        raw[:, layer * step: layer * step + b] = pooled[layer]
    toks = _labels(labels)
    # one category per position: the layer in each column's (the hover's "layer 3 · film · 2"), the row's token
    xs = [f"layer {la + 1} · {t} · {j}" if j < b else f"gap {la + 1}"
          for la in range(n_layers) for j, t in enumerate([*toks, ""])][:-1]
    ys = [f"{t} · {i}" for i, t in enumerate(toks)]
    fig = _figure(go.Heatmap(
        z=np.round(z, 3), customdata=np.round(raw, 3), x=xs, y=ys, colorscale="Blues", zmin=0.0, zmax=1.0,
        showscale=False, hoverongaps=False,
        hovertemplate="%{y} → %{x}<br>weight %{customdata:.3f}<extra></extra>",
    ))
    mid = b // 2
    fig.update_xaxes(type="category", tickmode="array", tickvals=[xs[la * step + mid] for la in range(n_layers)],
                     ticktext=[f"layer {la + 1}" for la in range(n_layers)], side="bottom", ticks="", showgrid=False)
    step_y = max(1, int(np.ceil(b / 16)))  # the rows' tokens, at most ~16 labels
    fig.update_yaxes(type="category", tickmode="array", tickvals=ys[::step_y], ticktext=toks[::step_y],
                     autorange="reversed", ticks="", showgrid=False, tickfont=dict(size=10))
    fig.update_yaxes(scaleanchor="x", scaleratio=1, constrain="domain")  # square tiles, not stretched strips
    fig.update_xaxes(constrain="domain")
    tile = int(min(260, max(90, 1000 / n_layers)))  # a tile's side in pixels, about: the row fills the width
    return _layout(fig, title, 110 + tile, download=download), notice


def cls_rows_heatmap(rows: np.ndarray, tokens: Sequence[str], title: str = "Where [CLS] looks, by layer",
                     columns: Sequence[str] | None = None, axis_title: str | None = None) -> go.Figure:
    """(L, T): attention from [CLS] to every token in each layer. ``columns``: what each column covers,
    as its hover says it (unique; default the token and its position), for columns that are spans of
    a document (``column_bins``); ``axis_title``: the x axis's title (e.g. how the columns were made)."""
    z = np.asarray(rows, dtype=np.float32)  # (L, T)
    n_layers, n = z.shape
    if n != len(tokens) or (columns is not None and len(columns) != n):
        raise ValueError(f"rows have {n} columns but there are {len(tokens)} tokens")
    cats = _cats(tokens) if columns is None else [_esc(c, 160) for c in columns]
    fig = _figure(go.Heatmap(
        z=np.round(z, 4), x=cats, y=[f"layer {i + 1}" for i in range(n_layers)], colorscale="Blues", zmin=0.0,
        zmax=_top(z), hovertemplate="%{y}: [CLS] → %{x}<br>weight %{z:.3f}<extra></extra>",
        colorbar=dict(title=dict(text="weight"), thickness=12),
    ))
    fig.update_xaxes(tickangle=-60, **_tick_kw(tokens, cats))
    if axis_title:
        fig.update_xaxes(title_text=_esc(axis_title, 200))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, 140 + 28 * n_layers + (24 if axis_title else 0))


def column_bins(special: Sequence[bool], max_columns: int = MAX_COLUMNS) -> list[tuple[int, int]]:
    """Spans [a, b) of consecutive columns, in order, covering every column once: each column alone when
    there are at most ``max_columns``; else a special column ([CLS], [SEP]) alone and each run of other
    columns cut into spans of ``k`` (the last of a run may be shorter), with the smallest ``k`` that gives
    at most ``max_columns`` spans."""
    flags = [bool(x) for x in special]
    n = len(flags)
    if n <= max_columns:
        return [(i, i + 1) for i in range(n)]
    if sum(flags) >= max_columns // 2:  # (no such document: [CLS], [SEP] and a pair's [SEP]) every column binned
        flags = [False] * n
    runs, start = [], 0  # (a, b) of the non-special runs, and the special columns between them
    for i, sp in enumerate([*flags, True]):
        if sp:
            if i > start:
                runs.append((start, i))
            if i < n:
                runs.append((i, i + 1, "special"))
            start = i + 1

    def cut(k: int) -> list[tuple[int, int]]:
        out = []
        for r in runs:
            out += [r[:2]] if len(r) == 3 else [(a, min(a + k, r[1])) for a in range(r[0], r[1], k)]
        return out

    regular = n - sum(flags)
    k = max(1, int(np.ceil(regular / max(1, max_columns - (n - regular)))))
    while len(spans := cut(k)) > max_columns:
        k += 1
    return spans


def bin_columns(values: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """(..., N) -> (..., B): each span's values summed (a span of attention weights: the share it gets)."""
    v = np.asarray(values, dtype=np.float64)
    if not spans:
        return v[..., :0]
    return np.stack([v[..., a:b].sum(axis=-1) for a, b in spans], axis=-1)


def rollout_heatmap(matrix: np.ndarray, tokens: Sequence[str], layer: int | None = None) -> go.Figure:
    """(T, T) attention rollout up to ``layer`` (1-based, for the title)."""
    where = f" up to layer {layer}" if layer else ""
    return attention_heatmap(matrix, tokens, title=f"Attention rollout{where} (flow from input tokens)",
                             download=f"attention_rollout_layer{layer}" if layer else "attention_rollout")


def prob_bar(labels: Sequence[str], probs: Sequence[float], title: str = "Class probabilities") -> go.Figure:
    p = np.asarray(probs, dtype=np.float64)
    best = int(p.argmax()) if p.size else -1
    names = _labels(labels)
    fig = _figure(go.Bar(
        x=p, y=names, orientation="h", text=[f"{v:.1%}" for v in p], textposition="auto",
        marker_color=["#1f77b4" if i == best else "#9ecae1" for i in range(len(p))],
        hovertemplate="%{y}: %{x:.4f}<extra></extra>",
    ))
    fig.update_xaxes(range=[0, 1], tickformat=".0%")
    fig.update_yaxes(autorange="reversed", type="category")
    return _layout(fig, title, 120 + 34 * len(p),
                   download="probabilities" if title == "Class probabilities" else f"probabilities_{file_name(title)}")


def attribution_bar(tokens: Sequence[str], scores: Sequence[float], title: str = "Attribution by token",
                    full: float | None = None, note: str = "") -> go.Figure:
    """Signed bar per token: green pushes towards the target class, red pushes away.

    ``full``: the colour scale's full value (``export.colour_scale``, e.g. |f(x) - f(baseline)|):
    the y axis then spans at least +-full, so bars of a text that changes the output by almost
    nothing stay small instead of being stretched to fill the chart. Without it the axis fits the
    bars (a per-text scale) and the title prints their largest size. ``note`` (e.g. the
    too-small warning) is written above the bars."""
    s = np.asarray(scores, dtype=np.float64)  # (T,)
    top = float(np.abs(s).max()) if s.size else 0.0
    fig = _figure(go.Bar(
        x=_cats(tokens), y=s, marker_color=[GREEN if v > 0 else RED if v < 0 else GREY for v in s],
        hovertemplate="%{x}: %{y:+.4f}<extra></extra>",
    ))
    fig.update_xaxes(tickangle=-60, **_tick_kw(tokens))
    fig.update_yaxes(title_text="attribution", zeroline=True, zerolinecolor="#555")
    if full is not None and full > 0:
        bound = max(full, top) * 1.08
        fig.update_yaxes(range=[-bound, bound])
        axis = f"axis fixed at ±{full:.3g}"
    else:
        axis = f"per-text axis, largest |attribution| {top:.3g}"
    if note:
        fig.add_annotation(text=_esc(note, 300), x=0.5, y=0.97, xref="paper", yref="paper", showarrow=False,
                           font=dict(color="#8a5a00"), bgcolor="#fff6e0")
    return _layout(fig, f"{title} ({axis})", 360, download=file_name(title), showlegend=False)


def cls_path_heatmap(scores: np.ndarray, layer_names: Sequence[str], tokens: Sequence[str],
                     title: str = "[CLS] path: attribution by depth", bound: float | None = None) -> go.Figure:
    """(L + 1, T) signed, on a diverging scale centred at 0 (red against, green for the class).
    ``bound``: the colour scale's full value (``export.colour_scale``), the same for every text;
    values beyond it get the end colour. Without it the scale is this text's largest |value|."""
    z = np.asarray(scores, dtype=np.float32)  # (L + 1, T)
    if z.shape[-1] != len(tokens):
        raise ValueError(f"scores have {z.shape[-1]} columns but there are {len(tokens)} tokens")
    per_text = bound is None or not bound > 0
    if per_text:  # no f(x) - f(baseline) given: the text's own largest value, printed on the colour bar
        bound = float(np.abs(z).max()) or 1.0
    fig = _figure(go.Heatmap(
        z=np.round(z, 5), x=_cats(tokens), y=[_esc(x) for x in layer_names], colorscale=DIVERGING,
        zmid=0.0, zmin=-bound, zmax=bound,
        hovertemplate="%{y} · %{x}<br>%{z:+.4f}<extra></extra>",
        colorbar=dict(title=dict(text=f"attribution<br>(per text, max {bound:.3g})" if per_text
                                 else f"attribution<br>(full at ±{bound:.3g})"), thickness=12),
    ))
    fig.update_xaxes(tickangle=-60, **_tick_kw(tokens))
    fig.update_yaxes(autorange="reversed")
    return _layout(fig, title, 160 + 28 * z.shape[0])


def methods_heatmap(scores: np.ndarray, methods: Sequence[str], tokens: Sequence[str],
                    title: str = "Methods side by side") -> go.Figure:
    """(M, T) signed scores, one row per method, each row divided by its own largest |score| (the
    methods' units differ: probability shares, gradient norms, fitted weights), so the rows compare
    which tokens each method ranks high, not sizes. The hover gives the raw score."""
    raw = np.asarray(scores, dtype=np.float64)  # (M, T)
    if raw.shape != (len(methods), len(tokens)):
        raise ValueError(f"scores are {raw.shape} but there are {len(methods)} methods and {len(tokens)} tokens")
    top = np.abs(raw).max(axis=1, keepdims=True)  # (M, 1)
    z = np.divide(raw, top, out=np.zeros_like(raw), where=top > 0)  # (M, T) in [-1, 1]
    fig = _figure(go.Heatmap(
        z=np.round(z, 4), x=_cats(tokens), y=[_esc(m) for m in methods], customdata=np.round(raw, 6),
        colorscale=DIVERGING, zmid=0.0, zmin=-1.0, zmax=1.0,
        hovertemplate="%{y} · %{x}<br>score %{customdata:+.4g} (%{z:+.0%} of this method's largest)<extra></extra>",
        colorbar=dict(title=dict(text="share of the<br>method's largest"), thickness=12, tickformat=".0%"),
    ))
    fig.update_xaxes(tickangle=-60, **_tick_kw(tokens))
    fig.update_yaxes(autorange="reversed", type="category")
    return _layout(fig, title, 170 + 30 * len(methods))


def agreement_heatmap(matrix: np.ndarray, names: Sequence[str], title: str = "Rank agreement (Spearman)") -> go.Figure:
    """(N, N) symmetric agreement in [-1, 1] between ``names``, with the value written in each cell."""
    z = np.asarray(matrix, dtype=np.float64)  # (N, N)
    labels = [_esc(n) for n in names]
    fig = _figure(go.Heatmap(
        z=np.round(z, 3), x=labels, y=labels, colorscale=DIVERGING, zmid=0.0, zmin=-1.0, zmax=1.0,
        text=[[("" if not np.isfinite(v) else f"{v:+.2f}") for v in r] for r in z], texttemplate="%{text}",
        hovertemplate="%{y} vs %{x}: %{z:+.2f}<extra></extra>", colorbar=dict(thickness=12),
    ))
    fig.update_xaxes(type="category", tickangle=-30)
    fig.update_yaxes(type="category", autorange="reversed")
    return _layout(fig, title, 140 + 40 * len(names))


def cls_lens_chart(layer_names: Sequence[str], labels: Sequence[str], probs: np.ndarray,
                   title: str = "[CLS] lens: class probability by layer") -> go.Figure:
    """(L + 1, C): one line per class."""
    p = np.asarray(probs, dtype=np.float64)  # (L + 1, C)
    xs = [_esc(x) for x in layer_names]
    fig = _figure()
    for c, label in enumerate(labels):
        fig.add_trace(go.Scatter(x=xs, y=p[:, c], mode="lines+markers", name=_esc(label),
                                 hovertemplate="%{fullData.name} · %{x}: %{y:.3f}<extra></extra>"))
    fig.update_yaxes(range=[0, 1], tickformat=".0%", title_text="probability")
    return _layout(fig, title, 360, legend=dict(orientation="h", y=-0.2))


def training_curves(train_points: Sequence[tuple[float, float]], eval_points: Sequence[dict],
                    max_steps: int | None = None, title: str = "Training") -> go.Figure:
    """Loss by step (training loss and validation loss) beside the validation metrics by step.

    ``train_points``: (step, loss); ``eval_points``: dicts with step and any of eval_loss,
    eval_accuracy, eval_macro_f1 (a tagger's: eval_entity_f1, eval_token_accuracy; the Trainer's log keys)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Loss", "Validation metrics"), horizontal_spacing=0.12,
                        figure=_figure())
    if train_points:
        xs, ys = zip(*train_points)
        fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="lines+markers", name="training loss",
                                 line=dict(color="#1f77b4"), marker=dict(size=5),
                                 hovertemplate="step %{x}: %{y:.4f}<extra>training loss</extra>"), row=1, col=1)
    ev_loss = [(e["step"], e["eval_loss"]) for e in eval_points if e.get("eval_loss") is not None]
    if ev_loss:
        xs, ys = zip(*ev_loss)
        fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="lines+markers", name="validation loss",
                                 line=dict(color="#ff7f0e", dash="dash"), marker=dict(size=7),
                                 hovertemplate="step %{x}: %{y:.4f}<extra>validation loss</extra>"), row=1, col=1)
    for key, name, color in (("eval_accuracy", "accuracy", "#2ca02c"), ("eval_macro_f1", "macro-F1", "#9467bd"),
                             ("eval_entity_f1", "entity F1", "#9467bd"),  # a tagger's
                             ("eval_token_accuracy", "words tagged right", "#2ca02c")):
        pts = [(e["step"], e[key]) for e in eval_points if e.get(key) is not None]
        if pts:
            xs, ys = zip(*pts)
            fig.add_trace(go.Scatter(x=list(xs), y=list(ys), mode="lines+markers", name=name,
                                     line=dict(color=color), marker=dict(size=7),
                                     hovertemplate=f"step %{{x}}: %{{y:.3f}}<extra>{name}</extra>"), row=1, col=2)
    rng = [0, max_steps] if max_steps else None
    fig.update_xaxes(title_text="step", range=rng, row=1, col=1)
    fig.update_xaxes(title_text="step", range=rng, row=1, col=2)
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[0, 1.02], tickformat=".0%", row=1, col=2)
    return _layout(fig, title, 340, legend=dict(orientation="h", y=-0.25))


def confusion_matrices(matrices: Sequence[tuple[str, np.ndarray]], labels: Sequence[str],
                       title: str = "Confusion matrix (validation)") -> go.Figure:
    """One heatmap per (name, (C, C) counts) side by side: rows = true class, columns = predicted.
    Cells show the count; the colour is the share of the true class (row-normalised)."""
    n = max(1, len(matrices))
    names = _labels(labels)
    fig = make_subplots(rows=1, cols=n, subplot_titles=[_esc(t, 60) for t, _ in matrices] or None,
                        horizontal_spacing=0.15 if n > 1 else 0.0, figure=_figure())
    for k, (_, cm) in enumerate(matrices):
        c = np.asarray(cm, dtype=np.float64)  # (C, C)
        share = c / np.maximum(c.sum(axis=1, keepdims=True), 1)  # (C, C) row-normalised
        fig.add_trace(go.Heatmap(
            z=np.round(share, 4), x=names, y=names, text=c.astype(int), texttemplate="%{text}",
            colorscale="Blues", zmin=0, zmax=1, showscale=k == n - 1,
            colorbar=dict(title=dict(text="share of row"), thickness=12, tickformat=".0%"),
            hovertemplate="true %{y} · predicted %{x}<br>%{text} rows (%{z:.0%} of the class)<extra></extra>",
        ), row=1, col=k + 1)
        fig.update_xaxes(title_text="predicted", type="category", row=1, col=k + 1)
        fig.update_yaxes(title_text="true" if k == 0 else None, type="category", autorange="reversed", row=1, col=k + 1)
    side = _axis_size(len(labels))
    return _layout(fig, title, min(700, max(320, side)))


# --------------------------------------------------------------------------- for other modules' figures
def new_figure(*traces) -> go.Figure:
    """A figure on this module's light template (for figures built in another module of the UI)."""
    return _figure(*traces)


def finish(fig: go.Figure, title: str, height: int, download: str | None = None, **kw) -> go.Figure:
    """This module's title, size, margins, font and download name on ``fig``."""
    return _layout(fig, title, height, download, **kw)


def escape(text: object, limit: int = 40) -> str:
    """``text`` cut at ``limit`` characters and HTML-escaped, as every text in a figure must be."""
    return _esc(text, limit)
