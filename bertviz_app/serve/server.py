"""The serving layer: one FastAPI app with the typed JSON API and the web page mounted on it.

- ``POST /v1/predict``, ``/v1/tag``, ``/v1/answer``, ``/v1/attention``, ``/v1/explain``, ``/v1/explain_answer``,
  ``/v1/compare``,
  ``/v1/summary``, ``/v1/delete_my_data``: pydantic request models (a wrong type, a missing or an unknown field is
  refused with 422 and a message naming the field) and pydantic response models; the schema at
  ``/openapi.json``, interactive docs at ``/docs``. The work is the same as the gradio endpoints'
  (``bertviz_app.service``), outside gradio's queue and event stream.
- Errors go through one handler (``error_response``): the core's own errors keep their statuses
  (``ModelNotFoundError`` 404, ``ResourceError`` and a full route 503, any other ``BertvizError``
  400), a body over ``MAX_BODY_BYTES`` 413, a body the models refuse 422 (400 for one that is not a
  JSON object); every answer is ``{"error": message}``, never a traceback.
- The gradio Blocks (``bertviz_app.ui``) mounted at ``/`` with ``gr.mount_gradio_app``.
- ``lifespan``: start-up and shutdown in one place (stale folders, the public mode's sweeper).
- ``serve(settings)``: the one entry point of ``python app.py`` and ``bertviz-app serve``.

This module reads no environment: the entry points hand it a ``Settings``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..config import Settings
from ..errors import BertvizError, InputError, ModelNotFoundError, ResourceError
from ..models import visitors
from ..models.build_job import start_default_build
from .allocator import tune_allocator
from .api_schema import (
    AnswerRequest,
    AnswerResponse,
    AttentionRequest,
    AttentionResponse,
    CompareRequest,
    CompareResponse,
    DeleteRequest,
    ErrorResponse,
    EvaluateRequest,
    EvaluateResponse,
    ExplainAnswerRequest,
    ExplainAnswerResponse,
    ExplainRequest,
    ExplainResponse,
    MessageResponse,
    PredictRequest,
    PredictResponse,
    SummaryRequest,
    SummaryResponse,
    TagRequest,
    TagResponse,
)
from .startup_page import StartupPage

__all__ = ["create_app", "serve", "start", "Running", "error_response", "REST_PREFIX", "MAX_BODY_BYTES",
           "BATCHED_CONCURRENCY", "EXPLAIN_CONCURRENCY", "UNEXPECTED", "BodyTooLarge", "ServerBusy", "Gate",
           "PredictRequest", "AttentionRequest", "ExplainRequest", "CompareRequest", "SummaryRequest", "DeleteRequest",
           "EvaluateRequest", "PredictResponse", "AttentionResponse", "ExplainResponse", "CompareResponse",
           "SummaryResponse", "EvaluateResponse", "MessageResponse", "ErrorResponse", "TagRequest", "TagResponse",
           "AnswerRequest", "AnswerResponse"]

log = logging.getLogger("bertviz_app.serve.server")

REST_PREFIX = "/v1"
# /predict requests let in at once: they wait in the core's micro-batcher, which runs them as one
# length-sorted batch.
BATCHED_CONCURRENCY = 32
# /explain requests let in at once: concurrent ones with equal arguments share attribute_many's
# passes; more than a few would only hold memory while they wait.
EXPLAIN_CONCURRENCY = 4
# Largest JSON body a call may send: the longest allowed text twice over, in the worst JSON
# escaping, plus room for the other fields.
MAX_BODY_BYTES = 1_000_000
DRAIN_BYTES = 16 * MAX_BODY_BYTES  # an oversized body is read up to this, then the connection closes
UNEXPECTED = "Unexpected error while handling this request; the details are in the server log."
EXAMPLE = '{"text": "A gorgeous, moving film."}'


# --------------------------------------------------------------------------- errors
class BodyTooLarge(InputError):
    """A request body over MAX_BODY_BYTES (413)."""


class ServerBusy(ResourceError):
    """A route's requests running and waiting are at their bound (503)."""


_STATUS = ((BodyTooLarge, 413), (ModelNotFoundError, 404), (ResourceError, 503), (BertvizError, 400))


def _json(obj, status_code: int = 200) -> Response:
    # orjson: the attention maps are ~10^5 floats; NaN/inf (none expected) would become null
    return Response(orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY), status_code=status_code,
                    media_type="application/json")


def error_response(request: Request, exc: Exception) -> Response:
    """The one exception handler: ``{"error": message}`` with the status the error calls for."""
    if isinstance(exc, RequestValidationError):
        status, message = _validation_message(request, exc)
        return _json({"error": message}, status)
    if isinstance(exc, StarletteHTTPException):
        return _json({"error": str(exc.detail)}, exc.status_code)
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return _json({"error": str(exc)}, status)
    log.error("Unexpected error in the JSON API", exc_info=exc)
    return _json({"error": UNEXPECTED}, 500)


def _validation_message(request: Request, exc: RequestValidationError) -> tuple[int, str]:
    """(status, message) for a body the request model refused, naming each field at fault."""
    route = ROUTES.get(request.url.path.removeprefix(request.scope.get("root_path", "")))
    takes = f" {REST_PREFIX}/{route[0]} takes: {', '.join(route[1].model_fields)}." if route else ""
    parts: dict[str, str] = {}
    for err in exc.errors():
        loc = [x for x in err.get("loc", ()) if x != "body"]
        # the field's name and list indexes; not the union member tried ("str", "list[str]")
        where = [str(x) for i, x in enumerate(loc) if i == 0 or isinstance(x, int)]
        kind = err.get("type", "")
        if kind == "json_invalid":
            why = (err.get("ctx") or {}).get("error", "")
            return 400, f"The body is not valid JSON ({why}); send an object such as {EXAMPLE}."
        if not where:  # the body itself: not an object, or none at all
            return 400, f"Send a JSON object of named parameters, e.g. {EXAMPLE}."
        field = ".".join(where)
        if kind == "extra_forbidden":
            parts.setdefault(field, f"{field}: unknown parameter")
        elif kind == "missing":
            parts.setdefault(field, f"{field}: missing (required)")
        else:
            parts.setdefault(field, f"{field}: {err.get('msg', 'invalid value')}")
    return 422, "; ".join(parts.values()) + "." + takes


# name -> (request model, response model, concurrency limit)
SPECS: dict[str, tuple[type[BaseModel], type[BaseModel], int]] = {
    "predict": (PredictRequest, PredictResponse, BATCHED_CONCURRENCY * 2),
    "tag": (TagRequest, TagResponse, 2),
    "answer": (AnswerRequest, AnswerResponse, 2),
    "attention": (AttentionRequest, AttentionResponse, 1),
    "explain": (ExplainRequest, ExplainResponse, EXPLAIN_CONCURRENCY),
    "explain_answer": (ExplainAnswerRequest, ExplainAnswerResponse, EXPLAIN_CONCURRENCY),
    "compare": (CompareRequest, CompareResponse, 1),
    "summary": (SummaryRequest, SummaryResponse, 2),
    "delete_my_data": (DeleteRequest, MessageResponse, 1),
    "evaluate": (EvaluateRequest, EvaluateResponse, 1),
}
ROUTES = {f"{REST_PREFIX}/{name}": (name, spec[0]) for name, spec in SPECS.items()}  # path -> (name, request model)


# --------------------------------------------------------------------------- the routes
class _LimitedRoute(APIRoute):
    """An APIRoute that refuses a body over ``limit`` bytes (MAX_BODY_BYTES; BodyTooLarge, 413) before
    reading more of it. ``limited_route`` makes one with another limit."""

    limit = MAX_BODY_BYTES
    what = "one text of up to the app's character limit"

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()
        limit, what = self.limit, self.what

        async def limited(request: Request) -> Response:
            declared = request.headers.get("content-length", "")
            body, n = bytearray(), 0
            async for chunk in request.stream():
                n += len(chunk)
                if n <= limit:
                    body += chunk
                elif n > max(DRAIN_BYTES, 2 * limit):  # read (and drop) a little more, so the client gets the answer
                    break
            if n > limit:
                raise BodyTooLarge(_too_large(int(declared) if declared.isdigit() else n, at_least=not declared,
                                              limit=limit, what=what))
            sent = False

            async def replay():
                nonlocal sent
                if sent:
                    return {"type": "http.disconnect"}
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}

            return await handler(Request(request.scope, replay))

        return limited


def limited_route(limit: int, what: str) -> type[APIRoute]:
    """A route class refusing bodies over ``limit`` bytes with 413, saying the limit is for ``what``."""
    return type("LimitedRoute", (_LimitedRoute,), {"limit": int(limit), "what": what})


def _too_large(n: int, at_least: bool = False, limit: int = MAX_BODY_BYTES,
               what: str = _LimitedRoute.what) -> str:
    return f"The request body is {'over ' if at_least else ''}{n:,} bytes; send at most {limit:,} ({what})."


class Gate:
    """One route's concurrency: ``limit`` requests work at once (in worker threads), ``queue_size``
    more wait; beyond that a request is refused at once (ServerBusy, 503), as gradio's queue does."""

    def __init__(self, name: str, limit: int, queue_size: int):
        self.name, self.limiter, self.queue_size = name, anyio.CapacityLimiter(limit), queue_size
        self.in_flight = 0  # requests running or waiting (touched by the event loop's thread only)

    async def run(self, work: Callable[[], Any]) -> Any:
        if self.in_flight >= self.limiter.total_tokens + self.queue_size:
            raise ServerBusy(f"The server is busy ({self.in_flight} {self.name} requests running or waiting); "
                             "try again in a few seconds.")
        self.in_flight += 1
        try:
            async with self.limiter:
                return await _in_daemon_thread(_translated(work))
        finally:
            self.in_flight -= 1


async def _in_daemon_thread(work: Callable[[], Any]) -> Any:
    """``work()`` in a daemon thread, awaited: the work blocks (a batcher's queue, the model lock), so a
    thread waits, not the event loop; a daemon one, so that a stopped server (SIGTERM) exits at once
    instead of waiting for the analyses in flight."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(ok: bool, value) -> None:
        if not done.done():  # the request may have been cancelled (the client went away)
            (done.set_result if ok else done.set_exception)(value)

    def run() -> None:
        try:
            result = (True, work())
        except BaseException as exc:  # noqa: BLE001 - raised again in the request's task
            result = (False, exc)
        try:
            loop.call_soon_threadsafe(settle, *result)
        except RuntimeError:  # the server stopped meanwhile: nobody waits for the answer
            pass

    threading.Thread(target=run, name="bertviz-api", daemon=True).start()
    return await done


def _translated(work: Callable[[], Any]) -> Callable[[], Any]:
    """``work`` with an unexpected error logged here and answered as a generic 500 (no traceback out)."""

    def run():
        try:
            return work()
        except BertvizError:
            raise
        except Exception as exc:  # noqa: BLE001 - the translation edge
            log.error("Unexpected error in the JSON API", exc_info=exc)
            raise _Unexpected() from None

    return run


class _Unexpected(Exception):
    pass


def _answer(model: type[BaseModel], out: dict, validate: bool = True, omit_unset: bool = False) -> Response:
    """The response model's JSON (validated; the attention maps, ~10^5 floats, are written by orjson).
    ``omit_unset``: an optional field the core's dict leaves out stays out (not null)."""
    if not validate:
        return _json(out)
    return Response(model.model_validate(out).model_dump_json(exclude_unset=omit_unset),
                    media_type="application/json")


class Api:
    """The /v1 routes of one app: its settings, its default model and, in public mode, its visitors."""

    def __init__(self, settings: Settings, default: str, demo=None):
        self.settings, self.default, self.demo = settings, default, demo
        # the work (torch, transformers) is imported when the app is made, not with this module:
        # ``serve`` has its start-up page answering by then
        self.service = importlib.import_module("..service", __package__)
        self.gates = {name: Gate(name, spec[2], settings.queue_size) for name, spec in SPECS.items()}

    def owner(self, request: Request) -> str | None:
        """The visitor behind a request in public mode (its X-Bertviz-Owner header or cookie), else None."""
        if not self.settings.public:
            return None
        return visitors.owner_hash(request.headers.get(visitors.HEADER) or request.cookies.get(visitors.COOKIE))

    def open(self, name: str | None, owner: str | None):
        return self.service.open_model(name, self.default, self.settings, owner)

    async def predict(self, body: PredictRequest, request: Request) -> Response:
        """Class probabilities, batched with concurrent calls. A text longer than the model reads is cut
        (truncated=true) unless window=true."""
        who = self.owner(request)
        out = await self.gates["predict"].run(lambda: self.service.predict(
            self.open(body.model, who), body.text, body.pair, body.window, body.stride, body.pool, body.calibrated))
        return _answer(PredictResponse, out)

    async def tag(self, body: TagRequest, request: Request) -> Response:
        """A token classification model's entities in a text (character offsets, label, score), with each
        word-piece's label. A long text is read in overlapping windows unless window=false."""
        who = self.owner(request)
        out = await self.gates["tag"].run(lambda: self.service.tag(
            self.open(body.model, who), body.text, body.aggregation, body.window, body.stride))
        return _answer(TagResponse, out)

    async def answer(self, body: AnswerRequest, request: Request) -> Response:
        """A question answering model's answer: the span of the context (characters, score), the n-best spans and
        the no-answer score. A long context is read in overlapping windows, the question in each."""
        who = self.owner(request)
        out = await self.gates["answer"].run(lambda: self.service.answer(
            self.open(body.model, who), body.question, body.context, body.n_best, body.max_answer_len,
            body.no_answer_threshold, body.stride))
        return _answer(AnswerResponse, out)

    async def attention(self, body: AttentionRequest, request: Request) -> Response:
        """Attention weights of every layer and head (or one layer), or another context-mixing measure
        (measure: norm, value_zeroing, alti), with each layer's matrix, their aggregation across layers and
        the [CLS] row."""
        who = self.owner(request)
        out = await self.gates["attention"].run(lambda: self.service.attention(
            self.open(body.model, who), body.text, body.pair, body.layer, body.measure, body.window, body.stride,
            body.window_index))
        return _answer(AttentionResponse, out, validate=False)

    async def explain(self, body: ExplainRequest, request: Request) -> Response:
        """Integrated Gradients of each token, with the convergence delta. Steps: by default as many as it
        takes for relative_delta <= 0.05; tolerance > 0: for that; n_steps alone or tolerance 0: exactly
        n_steps."""
        who = self.owner(request)
        out = await self.gates["explain"].run(lambda: self.service.explain(
            self.open(body.model, who), body.text, body.target, body.baseline, body.n_steps, body.pair,
            body.tolerance, body.window, body.stride))
        return _answer(ExplainResponse, out)

    async def explain_answer(self, body: ExplainAnswerRequest, request: Request) -> Response:
        """A question answering model's answer explained: the predicted span (or a span given by characters, or
        "no answer"), as log p(start) + log p(end) or its parts, per token and per word of the question and the
        context, by Integrated Gradients (with the convergence delta), occlusion, LIME or KernelSHAP; with
        faithfulness: true, each explanation's ERASER comprehensiveness and sufficiency."""
        who = self.owner(request)
        out = await self.gates["explain_answer"].run(lambda: self.service.explain_answer(
            self.open(body.model, who), body.question, body.context, body.span, body.parts, body.objective,
            body.baseline, body.n_steps, body.tolerance, body.max_answer_len, body.stride, body.method,
            body.n_samples, body.seed, body.features, body.faithfulness))
        return _answer(ExplainAnswerResponse, out)

    async def compare(self, body: CompareRequest, request: Request) -> Response:
        """Attribution methods side by side on one text: scores, cost, agreement (Spearman, top-k overlap)
        and ERASER faithfulness. A per-word method that would take too long is refused up front."""
        who = self.owner(request)
        if body.window:
            raise InputError("window is for /v1/explain and /v1/attention: the comparison takes a text that fits "
                             "the model.")
        out = await self.gates["compare"].run(lambda: self.service.compare(
            self.open(body.model, who), body.text, body.methods, body.target, body.baseline, body.n_steps,
            body.pair, body.tolerance, body.top_k, body.seed))
        return _answer(CompareResponse, out)

    async def summary(self, request: Request, body: SummaryRequest | None = None) -> Response:
        """Architecture, parameter counts by component, config, labels, device and dtype."""
        who = self.owner(request)
        name = body.model if body is not None else None
        out = await self.gates["summary"].run(lambda: self.service.summary(self.open(name, who)))
        return _answer(SummaryResponse, out)

    async def delete_my_data(self, request: Request, body: DeleteRequest | None = None) -> Response:
        """Public mode: remove every run and download of the visitor whose token the request carries."""
        who = self.owner(request)
        return _answer(MessageResponse, await self.gates["delete_my_data"].run(lambda: self._delete(who)))

    async def evaluate(self, body: EvaluateRequest, request: Request) -> Response:
        """Evaluate a model on a small labelled CSV sent as text: accuracy, macro-F1, per class, confusion
        matrix, slices worst first with 95% intervals, calibration before/after a fitted temperature and
        the misclassified rows; layers=true: a linear probe's accuracy per layer; compare_with: a second
        model on the same rows, compared (McNemar's exact test). Larger files: `bertviz-app evaluate FILE`."""
        who = self.owner(request)
        other = (body.compare_with or "").strip()
        out = await self.gates["evaluate"].run(lambda: self.service.evaluate(
            self.open(body.model, who), body.csv, body.text_column, body.label_column, body.pair_column, body.words,
            body.hold_out, body.seed, body.layers, self.open(other, who) if other else None))
        return _answer(EvaluateResponse, out, omit_unset=True)  # "layers", "comparison": only when asked

    def _delete(self, who: str | None) -> dict:
        if who is None:
            raise InputError("There is no per-visitor data outside public mode (BERTVIZ_PUBLIC=1): locally, "
                             "delete folders under models/runs/ yourself.")
        from ..models.registry import clear_cache  # lazily: the registry imports torch

        vis = getattr(self.demo, "bertviz_visitors", None)
        cached = [Path(p).parent for p in vis.pop_zips(who)] if vis is not None else []
        removed = self.service.delete_visitor_data(self.settings.models_dir, who,
                                                   [visitors.owner_folder(who), *cached])
        clear_cache()
        return {"message": self.service.deleted_message(removed)}

    def add_routes(self, app: FastAPI) -> None:
        errors = {status: {"model": ErrorResponse} for status in (400, 404, 413, 422, 500, 503)}
        evaluate = limited_route(int(self.settings.max_evaluate_mb * 1e6),
                                 "a CSV of up to BERTVIZ_MAX_EVALUATE_MB; evaluate larger files with `bertviz-app "
                                 "evaluate FILE`")
        for name, (_, response, _) in SPECS.items():
            app.router.add_api_route(f"{REST_PREFIX}/{name}", getattr(self, name), methods=["POST"],
                                     name=f"v1_{name}", response_model=response, responses=errors,
                                     route_class_override=evaluate if name == "evaluate" else _LimitedRoute,
                                     tags=["v1"])


# --------------------------------------------------------------------------- the app
def create_app(settings: Settings, model: str | None = None, page: bool = True) -> FastAPI:
    """The FastAPI app: the /v1 routes, and (``page``) the gradio page mounted at ``/``."""
    default = (model or settings.default_model).strip()
    demo = None
    if page:
        from .. import ui  # lazily: gradio and torch load after the start-up page answers

        demo = ui.build_app(settings, default)
    api = Api(settings, default, demo)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        stop = _start(settings, demo)
        try:
            yield
        finally:
            stop()

    app = FastAPI(title="BERT classifier explorer API", version="1",
                  description="Class probabilities, attention and attributions of BERT classifiers. Every route "
                              "takes a JSON object and answers one; errors are {\"error\": message}. The web page "
                              "is served at /.", lifespan=lifespan)
    for kind in (RequestValidationError, StarletteHTTPException, BertvizError, _Unexpected):
        app.add_exception_handler(kind, error_response)
    api.add_routes(app)
    app.state.bertviz_api = api
    if demo is not None:
        from .. import ui  # lazily: as in the line above

        gradio_app = ui.mount(app, demo, settings)
        gradio_app.add_exception_handler(TypeError, functools.partial(refuse_named_arguments, hint=ui.api.MALFORMED))
    return app


async def refuse_named_arguments(request: Request, exc: TypeError, hint: str):
    """A named call to gradio's API (``/call/v2/<name>``) with a missing or unknown argument: gradio_client's
    construct_args raises "No value provided for required argument: text" or "Parameter `x` is not a valid
    key-word argument ...", which gradio answers with a bare 500. Here: a 400 that says what to send (``hint``),
    logged as one line. Any other TypeError in a gradio route is a fault, not ours to answer: re-raised, it
    reaches the server's own handler and log."""
    if "/call/v2/" not in request.url.path:
        raise exc
    log.info("Refused a request: malformed call to %s", request.url.path.rsplit("/", 1)[-1])
    return JSONResponse({"error": f"{str(exc).split('. Please', 1)[0]}. {hint}"}, status_code=400)


def _start(settings: Settings, demo) -> Callable[[], None]:
    """Start-up of a served app; returns its shutdown. The micro-batchers need neither: their worker
    threads start with the first request of each model and end when idle."""
    from ..models.registry import clean_stale_folders  # lazily: the registry imports torch

    clean_stale_folders(settings.models_dir)  # what a killed save left behind, so the run list stays right
    stoppers = []
    if settings.public and demo is not None:  # visitors' runs not opened for run_ttl_hours are removed
        from ..ui import visitor  # lazily: the ui imports gradio

        stoppers.append(visitor.start_sweeper(settings.models_dir, settings.run_ttl_hours * 3600).set)

    def stop() -> None:
        for s in stoppers:
            s()

    return stop


def stop_on_signal(signum, frame):
    """SIGTERM while the app loads: stop as Ctrl-C does. The KeyboardInterrupt can be lost: a signal
    that lands while the interpreter runs a finaliser or a gc callback has its exception printed as
    "Exception ignored" and the start-up goes on (seen once on a loaded CI machine: the server was
    still up 60 s after the signal). So the first signal also arms a daemon timer that ends the
    process after STOP_GRACE_S; the build child dies with it (PR_SET_PDEATHSIG)."""
    if not getattr(stop_on_signal, "armed", False):
        stop_on_signal.armed = True
        timer = threading.Timer(STOP_GRACE_S, hard_exit, args=(128 + int(signum),))
        timer.daemon = True
        timer.start()
    raise KeyboardInterrupt


def hard_exit(code: int) -> None:
    """End the process now (after a stop signal whose graceful path did not end it in time)."""
    log.warning("still running %.0f s after the stop signal: exiting now", STOP_GRACE_S)
    logging.shutdown()
    os._exit(code)


def serve(settings: Settings, model: str | None = None, before_serving: Callable[[], Any] | None = None) -> None:
    """Serve the app on settings.host:settings.port until interrupted (Ctrl-C, SIGTERM): the one entry
    point of ``python app.py`` and ``bertviz-app serve``. A page answers at once (``StartupPage``) while
    gradio and torch load and, for the default model, its background build starts."""
    # before any thread starts, so its arena limit holds for all; glibc's own variables, if set, win
    tune_allocator(settings.mmap_threshold_kb, os.environ)
    if threading.current_thread() is threading.main_thread():  # docker stop / kill: exit like Ctrl-C, stopping
        signal.signal(signal.SIGTERM, stop_on_signal)  # the build child (uvicorn handles it once it runs)
    model = (model or settings.default_model).strip()
    try:  # a page at once, while gradio, torch and the app load (10 s quiet, minutes on a busy CPU)
        page = StartupPage(settings.host, settings.port, settings.models_dir, show_build=model == "default")
    except OSError as exc:
        raise SystemExit(f"Cannot listen on {settings.host}:{settings.port} ({exc.strerror}): "
                         "stop what uses that port or set BERTVIZ_PORT / BERTVIZ_HOST.") from None
    with page:
        log.info("starting; the page answers at http://%s:%d/ now", settings.host, settings.port)
        if model == "default":
            logging.getLogger("bertviz_app.build").info("%s", start_default_build(settings).line())
        server = _uvicorn(create_app(settings, model), settings)
        page.close()  # the port is free for the real app
        if before_serving is not None:
            before_serving()
    try:
        server.run()  # SIGINT/SIGTERM from here on: uvicorn's graceful shutdown, then the lifespan's
    except KeyboardInterrupt:
        pass


STOP_GRACE_S = 10.0  # after SIGTERM/Ctrl-C: the longest the server waits for work in flight before it exits


def _uvicorn(app: FastAPI, settings: Settings):
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, with a deadline on its graceful stop: gradio's queue waits for the events
        it runs, and an analysis of a long text in a worker thread (not a daemon) would hold the exit
        for minutes while ``docker stop`` waits. Past STOP_GRACE_S the process ends without them; the
        default model's build child dies with it (PR_SET_PDEATHSIG, build_job)."""

        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            # the open event streams cancelled at the stop are expected: no traceback for each in the log
            logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
            timer = threading.Timer(STOP_GRACE_S, _exit_now)
            timer.daemon = True
            timer.start()

    return Server(uvicorn.Config(app, host=settings.host, port=settings.port, log_level="warning",
                                 timeout_graceful_shutdown=2))


def _exit_now() -> None:
    log.warning("stopping with work still in flight (%.0f s after the signal)", STOP_GRACE_S)
    logging.shutdown()
    os._exit(0)


class Running:
    """A served app in a background thread (``start``): ``url``, ``app``, ``close()``."""

    def __init__(self, server, thread: threading.Thread, url: str, app: FastAPI):
        self.server, self.thread, self.url, self.app = server, thread, url, app

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start(settings: Settings, model: str | None = None, timeout: float = 120) -> Running:
    """The app served on settings.host:settings.port from a background thread (tests, benchmarks,
    notebooks); returns once it answers. ``close()`` stops it."""
    import time

    app = create_app(settings, model)
    server = _uvicorn(app, settings)
    thread = threading.Thread(target=server.run, name="bertviz-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"the app did not start on {settings.host}:{settings.port}")
        time.sleep(0.05)
    return Running(server, thread, f"http://{settings.host}:{settings.port}/", app)
