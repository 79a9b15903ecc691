"""The public HTTP API: five functions, served two ways from one definition.

- ``register(default)`` makes them gradio endpoints (``/predict``, ``/attention``, ``/explain``,
  ``/compare``, ``/summary``) for ``gradio_client`` / ``@gradio/client``: queued, with server-sent events.
- ``routes(default)`` makes the same functions plain JSON routes (``POST /v1/predict`` etc., body
  = the parameters by name, answer = the result, errors = ``{"error": message}`` with a 4xx/5xx
  status). They skip gradio's queue and event stream, which cost ~130 ms of a 25 ms prediction
  and most of the served throughput (bench/load_results.md). Concurrency is bounded the same way
  the queue bounds it: /predict and /explain wait in the core's micro-batchers, /attention and
  /compare run one at a time.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable

import anyio
import gradio as gr
import numpy as np
import orjson
from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

import bertviz_app as core

from . import common, visitor

__all__ = ["functions", "register", "routes", "REST_PREFIX", "BATCHED_CONCURRENCY", "EXPLAIN_CONCURRENCY"]

log = logging.getLogger("bertviz_app.api")

REST_PREFIX = "/v1"
# /predict requests allowed in at once: they wait in the core's micro-batcher, which runs them as
# one length-sorted batch (gradio's own thread pool holds 40 workers; leave some for the rest).
BATCHED_CONCURRENCY = 32
# /explain requests let in at once: concurrent ones with equal arguments share attribute_many's
# passes; more than a few would only hold memory while they wait (the queue bounds the rest).
EXPLAIN_CONCURRENCY = 4
# Largest JSON body a REST call may send: the longest allowed text (BERTVIZ_MAX_CHARS) twice over,
# in the worst JSON escaping, plus room for the other fields.
MAX_BODY_BYTES = 1_000_000


def functions(default: str) -> dict[str, Callable]:
    """{endpoint name: function}; ``default`` is the model a call without ``model`` uses."""

    def predict(text: str, pair: str = "", model: str = default, window: bool = False, stride: int = 128,
                pool: str = "mean") -> dict:
        """Class probabilities: {"label", "scores": {class: probability}, "truncated", "text"}. A text longer
        than the model reads is cut ("truncated": true) unless window=true: then it is classified in
        overlapping windows (stride tokens shared by neighbours) whose logits are pooled by pool
        ("mean" or "max"), and "windows" says how many were read."""
        lm = common.load(model, default)
        # Batched with the other users' concurrent /predict calls (bertviz_app.batching).
        if isinstance(stride, float) and stride.is_integer():  # JSON clients may send 128.0
            stride = int(stride)
        pred = core.predict_one(lm, text, pair if pair and pair.strip() else None, window=bool(window),
                                stride=stride, pool=pool)  # a bad stride/pool: InputError saying what to send
        return pred.to_dict()

    def attention(text: str, pair: str = "", layer: int = 0, model: str = default) -> dict:
        """Attention weights: {"tokens", "weights", "truncated"} with weights[layer][head][i][j] (query i,
        key j); layer=0 returns every layer, layer=k (1-based) only that one (as a list of one)."""
        lm = common.load(model, default)
        maps = core.attention(lm, text, pair=pair if pair and pair.strip() else None)
        layer = _int(layer or 0, "layer")
        if not 0 <= layer <= maps.num_layers:
            raise core.InputError(f"layer must be 0 (all) or 1 to {maps.num_layers}, got {layer}.")
        w = maps.weights if not layer else maps.weights[layer - 1 : layer]  # (L or 1, H, T, T)
        # 5 decimals (rows still sum to 1 within 1e-4 for short texts): float32 -> float64 -> JSON
        # would otherwise spend ~18 characters per weight on noise digits
        return {"tokens": list(maps.tokens), "weights": np.round(w, 5).tolist(), "truncated": maps.info.truncated}

    def explain(text: str, target: str = "", baseline: str = "pad", n_steps: int | None = None, pair: str = "",
                model: str = default, tolerance: float | None = None) -> dict:
        """Integrated Gradients: {"tokens", "attributions", "target", "delta", "relative_delta", "n_steps",
        "tolerance", "baseline", "f_x", "f_baseline", "truncated"}. target "" = the predicted class. Steps: by
        default as many as it takes for relative_delta <= 0.05 (the page's choice); tolerance > 0: for that
        relative_delta (n_steps is then ignored); n_steps alone, or tolerance 0: exactly n_steps (default 50).
        The answer's "tolerance" (null: fixed) and "n_steps" say which was used."""
        lm = common.load(model, default)
        n, tol = _steps(n_steps, tolerance)
        # Batched with concurrent /explain calls on the same model with the same arguments.
        attr = core.explain_one(lm, text, target=target or None, baseline=baseline, n_steps=n,
                                pair=pair if pair and pair.strip() else None, tolerance=tol)
        out = attr.to_dict()
        out["relative_delta"] = common.finite(attr.relative_delta)
        out["truncated"] = attr.info.truncated
        return out

    def compare(text: str, methods: str = "", target: str = "", baseline: str = "pad", n_steps: int | None = None,
                pair: str = "", model: str = default, tolerance: float | None = None, top_k: int = 3,
                seed: int = 0) -> dict:
        """Attribution methods side by side on one text: {"tokens", "methods": {name: attribution with its
        "seconds", "n_forward", "n_backward", "faithfulness" (ERASER comprehensiveness/sufficiency AOPC) and
        "rollout_spearman"}, "spearman", "top_k_overlap" (method x method, in the order asked), "top_k",
        "rollout", "most_faithful", "reading"}. methods: comma-separated names (or a JSON list); "" = all of
        integrated_gradients, gradient_x_input, saliency, occlusion, kernel_shap, lime. Every method explains
        the same class (target "" = the predicted one). Integrated Gradients' steps as for /explain. A per-word
        method that would take too long is refused up front."""
        lm = common.load(model, default)
        names = _names(methods) or core.METHODS
        n, tol = _steps(n_steps, tolerance)
        c = core.compare_methods(lm, text, methods=names, target=target or None, baseline=baseline,
                                 pair=pair if pair and pair.strip() else None, n_steps=n,
                                 top_k=_int(top_k, "top_k"), seed=_int(seed, "seed"), tolerance=tol)
        return c.to_dict()

    def summary(model: str = default) -> dict:
        """Architecture, parameter counts by component, config, labels, device and dtype."""
        return core.summary(common.load(model, default)).to_dict()

    return {"predict": predict, "attention": attention, "explain": explain, "compare": compare, "summary": summary}


def _steps(n_steps, tolerance) -> tuple[int | None, float | None]:
    """Integrated Gradients' (n_steps, tolerance) for the core: None for what the client left out
    (both out: the core's default, adaptive at DEFAULT_TOLERANCE); tolerance 0: exactly n_steps
    (FIXED_N_STEPS when none is sent), as before the adaptive default."""
    n = None if n_steps is None else _int(n_steps, "n_steps")
    tol = None if tolerance is None else _float(tolerance, "tolerance")
    if tol == 0:
        return (core.FIXED_N_STEPS if n is None else n), None
    return n, tol


def _names(value) -> tuple[str, ...]:
    """Method names from "a, b" or ["a", "b"]."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise core.InputError(f"methods must be comma-separated names or a list of names, got {value!r}.")
    return tuple(v.strip() for v in value if v.strip())


def _int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise core.InputError(f"{name} must be a whole number, got {value!r}.")
    try:
        f = float(value)
    except ValueError:
        raise core.InputError(f"{name} must be a whole number, got {value!r}.") from None
    if not f.is_integer():
        raise core.InputError(f"{name} must be a whole number, got {value!r}.")
    return int(f)


def _float(value, name: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise core.InputError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(f):
        raise core.InputError(f"{name} must be a finite number, got {value!r}.")
    return f


def register(default: str, heavy: dict) -> None:
    """The functions as gradio endpoints (inside a Blocks context). ``heavy``: the app's
    one-at-a-time concurrency group, shared with Analyze (attention maps are large and unbatched)."""
    fns = functions(default)
    # The batchers serialise the model work, so many requests may wait inside them at once: that is
    # what lets them gather into shared batches.
    gr.api(common.guard(fns["predict"]), api_name="predict", concurrency_limit=BATCHED_CONCURRENCY,
           concurrency_id="predict")
    gr.api(common.guard(fns["attention"]), api_name="attention", **heavy)
    gr.api(common.guard(fns["explain"]), api_name="explain", concurrency_limit=EXPLAIN_CONCURRENCY,
           concurrency_id="explain")
    gr.api(common.guard(fns["compare"]), api_name="compare", **heavy)
    gr.api(common.guard(fns["summary"]), api_name="summary", concurrency_limit=2)


# --------------------------------------------------------------------------- plain JSON routes
_STATUS = ((core.ModelNotFoundError, 404), (core.ResourceError, 503), (core.BertvizError, 400))


def _json(obj, status_code: int = 200) -> Response:
    # orjson: the attention maps are ~10^5 floats; NaN/inf (none expected) would become null
    return Response(orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY), status_code=status_code,
                    media_type="application/json")


def _error(exc: BaseException) -> Response:
    """One JSON error: the core's own message (written for users) or a generic one, logged."""
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return _json({"error": str(exc)}, status_code=status)
    log.error("Unexpected error in the JSON API", exc_info=exc)
    return _json({"error": common.UNEXPECTED}, status_code=500)


def _route(name: str, fn: Callable, limiter: anyio.CapacityLimiter) -> APIRoute:
    params = inspect.signature(fn).parameters
    required = [p for p, v in params.items() if v.default is inspect.Parameter.empty]
    in_flight = [0]  # requests of this route running or waiting (the event loop's thread only)

    async def endpoint(request: Request) -> Response:
        # the same bound as gradio's queue (BERTVIZ_QUEUE_SIZE waiting beyond those running)
        if in_flight[0] >= limiter.total_tokens + core.get_settings().queue_size:
            return _json({"error": f"The server is busy ({in_flight[0]} {name} requests running or waiting); "
                                   "try again in a few seconds."}, 503)
        in_flight[0] += 1
        try:
            return await _handle(request)
        finally:
            in_flight[0] -= 1

    async def _handle(request: Request) -> Response:
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return _json({"error": f"The request body is {len(raw):,} bytes; send at most "
                                            f"{MAX_BODY_BYTES:,} (one text of up to "
                                            f"{core.get_settings().max_chars:,} characters)."}, status_code=413)
        try:
            body = orjson.loads(raw) if raw.strip() else {}
        except orjson.JSONDecodeError as exc:
            return _json({"error": f"The body is not valid JSON ({exc}); send an object such as "
                                            '{"text": "A gorgeous, moving film."}.'}, status_code=400)
        if not isinstance(body, dict):
            return _json({"error": "Send a JSON object of named parameters, e.g. "
                                            '{"text": "A gorgeous, moving film."}.'}, status_code=400)
        unknown = sorted(set(body) - set(params))
        missing = [p for p in required if p not in body]
        if unknown or missing:
            what = "; ".join(filter(None, [f"unknown parameter(s) {', '.join(unknown)}" if unknown else "",
                                           f"missing {', '.join(missing)}" if missing else ""]))
            return _json({"error": f"{what}. {REST_PREFIX}/{name} takes: {', '.join(params)}."},
                                  status_code=400)
        for p in ("text", "pair", "baseline", "model", "pool"):
            if body.get(p) is not None and not isinstance(body[p], str):
                return _json({"error": f"{p} must be a string, got {type(body[p]).__name__}."},
                                      status_code=400)
        kwargs = {k: v for k, v in body.items() if v is not None}
        _carry_owner_token(request)
        try:
            # the work blocks (a batcher's queue, the model lock): a worker thread waits, not the loop
            out = await anyio.to_thread.run_sync(lambda: fn(**kwargs), limiter=limiter)
        except Exception as exc:  # noqa: BLE001 - the translation edge
            return _error(exc)
        return _json(out)

    endpoint.__name__ = f"rest_{name}"
    endpoint.__doc__ = fn.__doc__
    return APIRoute(f"{REST_PREFIX}/{name}", endpoint, methods=["POST"], name=f"rest_{name}")


def routes(default: str) -> list[APIRoute]:
    """``POST /v1/<name>`` for each function, for ``launch(app_kwargs={"routes": ...})``: routes
    given to the app at creation come before gradio's own, so nothing of gradio's shadows them."""
    limits = {"predict": BATCHED_CONCURRENCY * 2, "explain": EXPLAIN_CONCURRENCY, "attention": 1, "compare": 1,
              "summary": 2}
    out = [_route(name, fn, anyio.CapacityLimiter(limits[name])) for name, fn in functions(default).items()]
    return [*out, _route("delete_my_data", delete_my_data, anyio.CapacityLimiter(1))]


def _carry_owner_token(request: Request) -> None:
    """The visitor's owner token for this request's work (public mode: a run is answered only to the
    request that carries its owner's token, in the X-Bertviz-Owner header or the bertviz_owner cookie)."""
    visitor.REST_TOKEN.set(request.headers.get(visitor.HEADER) or request.cookies.get(visitor.COOKIE) or "")


def delete_my_data() -> dict:
    """Public mode: remove every run of the visitor whose owner token the request carries
    (X-Bertviz-Owner header): {"message"}."""
    return {"message": visitor.delete_my_data(markdown=False)}
