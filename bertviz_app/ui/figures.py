"""Every chart downloads as SVG and PNG, for papers (issue 20).

``plot(...)`` is ``gr.Plot`` with two small buttons under it, "SVG" and "PNG". They run in the
browser only (no server round trip, nothing recomputed): ``HEAD`` (mounted into the page's
``<head>``) defines ``window.bvFigure(elem_id, format)``, which exports the figure drawn in that
plot with plotly.js's own ``Plotly.toImage`` / ``Plotly.downloadImage``:

- PNG: plotly's PNG at twice the size on screen (sharp in print).
- SVG: plotly's SVG is vector for bars, lines and text (ticks, titles, legends are ``<text>``), but it
  draws a heatmap as one embedded bitmap. ``bvFigure`` replaces each heatmap's bitmap by one
  ``<rect>`` per cell, at the cell's place on the axes (``l2p`` of the brick edges plotly computed)
  and in the colour plotly gives its value (the trace's resolved colour scale and z range), so the
  heatmaps are vector too. Gaps (NaN cells, the overview's spacing) stay empty.

The file name says what the figure holds: ``layout.meta.download`` set by ``plots`` (for example
``attention_layer_3_head_2``), else the plot's id.
"""

from __future__ import annotations

import gradio as gr

__all__ = ["CSS", "HEAD", "clickable_plot", "clicked_value", "plot"]

_JS = r"""
(() => {
  const NS = 'http://www.w3.org/2000/svg';
  const save = (blob, name) => {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 30000);
  };
  const ctx = document.createElement('canvas').getContext('2d');
  const rgba = (c) => {  // any CSS colour -> [r, g, b, a]
    ctx.fillStyle = '#000';
    ctx.fillStyle = c;
    const s = ctx.fillStyle;
    if (s[0] === '#') return [1, 3, 5].map((i) => parseInt(s.slice(i, i + 2), 16)).concat([1]);
    const m = s.match(/[\d.]+/g).map(Number);
    return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
  };
  const colourOf = (trace) => {  // plotly's mapping: linear in RGB between the scale's stops, clamped
    const stops = trace.colorscale.map(([f, c]) => [Number(f), rgba(c)]);
    if (trace.reversescale) stops.reverse().forEach((s) => { s[0] = 1 - s[0]; });
    const lo = trace.zmin, hi = trace.zmax;
    return (z) => {
      let f = hi > lo ? (z - lo) / (hi - lo) : 0.5;
      f = Math.min(1, Math.max(0, f));
      let k = 1;
      while (k < stops.length - 1 && stops[k][0] < f) k++;
      const [f0, c0] = stops[k - 1], [f1, c1] = stops[k];
      const t = f1 > f0 ? (f - f0) / (f1 - f0) : 0;
      const c = c0.map((v, i) => v + (c1[i] - v) * t);
      return [`rgb(${Math.round(c[0])}, ${Math.round(c[1])}, ${Math.round(c[2])})`, c[3]];
    };
  };
  const axis = (gd, id) => gd._fullLayout[(id[0] === 'x' ? 'xaxis' : 'yaxis') + id.slice(1)];
  // Each heatmap's embedded bitmap -> one <rect> per cell (same place, same colour).
  const vectorHeatmaps = (gd, doc) => {
    const traces = gd._fullData.filter((t) => t.type === 'heatmap' && t.visible !== false);
    const bySubplot = {};
    traces.forEach((t) => { (bySubplot[t.xaxis + t.yaxis] = bySubplot[t.xaxis + t.yaxis] || []).push(t); });
    doc.querySelectorAll('.overplot > g').forEach((sub) => {
      const mine = bySubplot[sub.getAttribute('class')] || [];
      sub.querySelectorAll('.heatmaplayer image').forEach((img, k) => {
        const trace = mine[k];
        if (!trace) return;
        const cd = gd.calcdata[trace.index][0];
        const xa = axis(gd, trace.xaxis), ya = axis(gd, trace.yaxis), colour = colourOf(trace);
        const xs = cd.x.map((v) => xa.l2p(v)), ys = cd.y.map((v) => ya.l2p(v));
        const g = doc.createElementNS(NS, 'g');
        g.setAttribute('class', 'bv-cells');
        g.setAttribute('shape-rendering', 'crispEdges');
        cd.z.forEach((row, i) => row.forEach((z, j) => {
          if (z === null || z === undefined || !Number.isFinite(Number(z))) return;
          const [fill, alpha] = colour(Number(z));
          const r = doc.createElementNS(NS, 'rect');
          r.setAttribute('x', Math.min(xs[j], xs[j + 1]).toFixed(2));
          r.setAttribute('y', Math.min(ys[i], ys[i + 1]).toFixed(2));
          r.setAttribute('width', Math.abs(xs[j + 1] - xs[j]).toFixed(2));
          r.setAttribute('height', Math.abs(ys[i + 1] - ys[i]).toFixed(2));
          r.setAttribute('fill', fill);
          if (alpha < 1) r.setAttribute('fill-opacity', alpha.toFixed(3));
          g.appendChild(r);
        }));
        img.replaceWith(g);
      });
    });
  };
  window.bvFigure = async (elemId, format) => {
    const gd = document.querySelector(`#${elemId} .js-plotly-plot`);
    if (!gd || !window.Plotly || !gd._fullLayout) return;
    const meta = gd.layout && gd.layout.meta;
    const name = (meta && meta.download) || elemId.replace(/^bv-/, '');
    const size = {width: gd._fullLayout.width, height: gd._fullLayout.height};
    if (format === 'png') {
      await window.Plotly.downloadImage(gd, {format: 'png', filename: name, scale: 2, ...size});
      return;
    }
    const text = await window.Plotly.toImage(gd, {format: 'svg', imageDataOnly: true, ...size});
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    vectorHeatmaps(gd, doc);
    const svg = '<?xml version="1.0" encoding="UTF-8"?>\n' + new XMLSerializer().serializeToString(doc);
    save(new Blob([svg], {type: 'image/svg+xml'}), `${name}.svg`);
  };
})();
"""

# A plot made by ``clickable_plot``: a click on a point writes the point's customdata (and the time, so
# the same point clicked twice is still a change) into the hidden textbox ``#<elem_id>-clicked`` and
# fires its input, so a Python handler hears the click (gr.Plot has no click event). A plot redrawn by
# Plotly.newPlot gets a new event emitter (``gd._ev``): the listener is added again whenever it changes.
_CLICK_JS = r"""
(() => {
  const send = (id) => (ev) => {
    const p = ev && ev.points && ev.points[0];
    if (!p || p.customdata === undefined || p.customdata === null) return;
    const box = document.querySelector(`#${id}-clicked textarea, #${id}-clicked input`);
    if (!box) return;
    box.value = `${p.customdata}:${Date.now()}`;
    box.dispatchEvent(new Event('input', {bubbles: true}));
  };
  setInterval(() => {
    document.querySelectorAll('.bv-clickable').forEach((wrap) => {
      const gd = wrap.querySelector('.js-plotly-plot');
      if (!gd || !gd._ev || !gd.on || gd.__bvEv === gd._ev) return;
      gd.__bvEv = gd._ev;
      gd.on('plotly_click', send(wrap.id));
    });
  }, 300);
})();
"""

HEAD = f"<script>{_JS}</script><script>{_CLICK_JS}</script>"
CSS = """
.bv-fig-downloads { justify-content: flex-end; gap: 6px; margin-top: -6px; }
.bv-fig-downloads button { font-size: 0.8em; padding: 2px 10px; }
"""


def plot(label: str, elem_id: str, **kw) -> gr.Plot:
    """``gr.Plot(label=..., elem_id=...)`` with "SVG" and "PNG" download buttons under it (ids
    ``{elem_id}-svg`` / ``{elem_id}-png``), in one column so a row of plots stays a row."""
    with gr.Column(min_width=160):
        shown = gr.Plot(label=label, elem_id=elem_id, **kw)
        with gr.Row(elem_classes=["bv-fig-downloads"]):
            for fmt in ("svg", "png"):
                gr.Button(f"Download {fmt.upper()}", size="sm", min_width=130, scale=0, variant="secondary",
                          elem_id=f"{elem_id}-{fmt}").click(
                    None, js=f"() => {{ window.bvFigure && window.bvFigure('{elem_id}', '{fmt}'); }}",
                    queue=False, api_visibility="private")
    return shown


def clickable_plot(label: str, elem_id: str, **kw) -> tuple[gr.Plot, gr.Textbox]:
    """``plot(...)`` whose point clicks reach Python: returns the plot and a hidden textbox
    (``{elem_id}-clicked``) that a click on a point sets to ``"<customdata>:<time>"`` (its
    ``change`` event is the click; ``clicked_value`` reads the customdata back)."""
    shown = plot(label, elem_id, elem_classes=["bv-clickable"], **kw)
    box = gr.Textbox(visible="hidden", elem_id=f"{elem_id}-clicked", container=False)
    return shown, box


def clicked_value(value: str | None) -> str | None:
    """The customdata of the point a ``clickable_plot`` click sent (None for an empty value)."""
    if not value or not isinstance(value, str):
        return None
    return value.rsplit(":", 1)[0] or None
