"""The web app's side of public mode (``BERTVIZ_PUBLIC=1``): who the visitor is, and the checks
the tabs call before they list, load, zip, compare, push or delete a run.

The visitor's owner token is 32 random bytes kept in the browser (``gr.BrowserState``, so every tab
of one browser is one visitor, and a reload or a server restart keeps it). On page load the token
is sent once and the session (``gr.Request.session_hash``) is mapped to its owner hash; every
later event of that page finds its owner through the request gradio sets for the event
(``gradio.context.LocalContext.request``), so the tabs' handlers keep their signatures. API
clients send the token in the ``X-Bertviz-Owner`` header (or the ``bertviz_owner`` cookie);
without one they own nothing and see only the shared models. (The JSON routes of
``bertviz_app.serve.server`` read it themselves.)

The settings are the app's own: ``build_app(settings)`` keeps them on the Blocks, and an event's
handlers find them there (``app_settings``), as they find this app's ``Visitors``.

In local mode every function here answers as before: ``owner()`` is None and nothing is checked.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path

import gradio as gr

import bertviz_app as core
from bertviz_app import service
from bertviz_app.config import Settings
from bertviz_app.evaluate import evaluation_runs
from bertviz_app.models import visitors
from bertviz_app.train.finetune import run_stem

from . import uploads
from .markup import esc

log = logging.getLogger("bertviz_app.ui")

HEADER = visitors.HEADER
COOKIE = visitors.COOKIE
STORAGE_KEY = "bertviz-owner"
# BrowserState encrypts the stored value with this key. It travels in the page's config, so it guards
# nothing by itself (the token's safety is the browser's per-origin storage); it is fixed so that a
# restarted server can still read the tokens browsers kept.
SECRET = "bertviz-owner-v1"
MAX_SESSIONS = 100_000
ZIP_KEEP_S = 3600  # a visitor's downloaded zips are removed at their next download after an hour
FOLLOWERS_SPARE = 4  # fine-tune events beyond the jobs (finetune_concurrency)


class Visitors:
    """Per-app state of public mode: sessions -> owners, upload counts (the fine-tune queue is the
    Fine-tune tab's ``FinetuneJobs``)."""

    def __init__(self, limits: visitors.Limits):
        self.limits = limits
        self.uploads = visitors.UploadCounter(limits.uploads_per_hour)
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self.zips: dict[str, str] = {}  # a file in gradio's cache -> the owner it was made for (ZipGuard)

    def register(self, session_hash: str, owner: str) -> None:
        with self._lock:
            self._sessions[session_hash] = owner
            self._sessions.move_to_end(session_hash)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)

    def lookup(self, session_hash: str | None) -> str | None:
        with self._lock:
            return self._sessions.get(session_hash or "")

    def add_zip(self, path: str, owner: str) -> None:
        with self._lock:
            if len(self.zips) > 1000:  # forget files gradio's delete_cache has removed
                self.zips = {p: o for p, o in self.zips.items() if os.path.exists(p)}
            self.zips[path] = owner

    def pop_zips(self, owner: str) -> list[str]:
        """Forget the owner's cached zips; returns their paths (to delete)."""
        with self._lock:
            mine = [p for p, o in self.zips.items() if o == owner]
            for p in mine:
                del self.zips[p]
            return mine


# --------------------------------------------------------------------------- who is asking
def app_settings() -> Settings:
    """The settings of the app whose event is being handled (``build_app(settings)`` keeps them on its
    Blocks); outside an app's event (a test calling a handler), the defaults."""
    from gradio.context import LocalContext

    return getattr(LocalContext.blocks.get(None), "bertviz_settings", None) or Settings()


def public() -> bool:
    return app_settings().public


def runs_dir() -> Path:
    return app_settings().models_dir / "runs"


def _request():
    from gradio.context import LocalContext

    return LocalContext.request.get(None)


def _app() -> Visitors | None:
    from gradio.context import LocalContext

    return getattr(LocalContext.blocks.get(None), "bertviz_visitors", None)


def app_state() -> Visitors:
    """This app's Visitors (a fresh one from the settings outside an app's event, e.g. in a test)."""
    return _app() or Visitors(visitors.Limits.from_settings(app_settings()))


def owner() -> str | None:
    """The owner hash of the visitor behind the current event; None in local mode;
    ``visitors.NOBODY`` for a public request that carries no token (it owns nothing)."""
    if not public():
        return None
    req = _request()
    if req is None:
        return visitors.NOBODY
    app = _app()
    known = app.lookup(getattr(req, "session_hash", None)) if app is not None else None
    if known:
        return known
    headers = getattr(req, "headers", None) or {}
    return visitors.owner_hash(headers.get(HEADER.lower()) or headers.get(HEADER))


def ready() -> bool:
    """False while a public page has not told its owner yet (the first page-load events)."""
    return owner() != visitors.NOBODY


# --------------------------------------------------------------------------- checks the tabs call
def visible(models: list[dict]) -> list[dict]:
    """The models (``list_models()``) or runs (``list_runs()``) this visitor may see."""
    return visitors.visible(models, owner(), runs_dir())


def check(name: str | None) -> None:
    """A run name another visitor owns (or none owns) answers as an unknown run; an owned run is
    marked as opened (the sweeper keeps it)."""
    path = visitors.check_access(name, owner(), runs_dir())
    if path is not None:
        visitors.touch(path)


def check_model(name: str | None, default: str) -> None:
    """``check``, and in public mode no model folders by path (except the operator's default)."""
    visitors.check_model(name, default, owner(), runs_dir())


def hide_others(message: str) -> str:
    """A registry message with other visitors' run names taken out (e.g. its "Available: ..." list)."""
    who = owner()
    return message if who is None else service.hide_others(message, who, app_settings())


def claim(plan):
    """Public mode: the plan's runs saved as this visitor's (owner hash in run.json, names prefixed with
    the visitor's tag so names never collide across visitors), after the quota check (LimitError)."""
    who = owner()
    if who is None:
        return plan
    if who == visitors.NOBODY:
        raise core.InputError("This page has no owner token yet: reload the page, then start again.")
    visitors.check_quota(runs_dir(), who, app_state().limits, new_runs=len(plan.modes))
    tag = visitors.owner_tag(who)
    names = []
    for mode, name in zip(plan.modes, plan.names):
        stem = f"{tag}-{name or run_stem(mode, plan.data_hash)}"
        if len(stem) > 64:
            raise core.InputError(f"Run names may be at most {64 - len(tag) - 1} characters here; "
                                  f"{name!r} is longer.")
        chosen, k = stem, 2
        while (runs_dir() / chosen).exists():  # the visitor's own earlier run of the same name or data
            if name:
                raise core.InputError(f"You already have a run named {name!r}: choose another name.")
            chosen, k = f"{stem}-{k}", k + 1
        names.append(chosen)
    return replace(plan, owner=who, names=tuple(names))


def finetune_concurrency(settings: Settings | None = None) -> int:
    """Fine-tune events that may run at once. Each follows a job (``FinetuneJobs``: one per visitor, one
    training at a time, the others waiting with their position shown), so more than the jobs: the
    running one and the waiting ones (public mode), each followed by a page, plus FOLLOWERS_SPARE for a
    reopened page following its job and a second Start refused at once instead of queued behind them."""
    s = settings or app_settings()
    return (1 + s.finetune_queue if s.public else 1) + FOLLOWERS_SPARE


def upload(path: str | None) -> None:
    """Accept a file a handler is about to read: refused (``InputError``) unless it is a file uploaded to
    gradio's upload folder (``uploads.upload_path``), in either mode. Public mode: the upload is also
    counted (LimitError past ``max_uploads_per_hour``; the file is then deleted unread)."""
    if not path:
        return
    uploads.upload_path(path)
    who = owner()
    if who is None:
        return
    try:
        app_state().uploads.count(who)
    except core.LimitError:
        discard(path)
        raise


def discard(path: str | None) -> None:
    """Public mode: delete an uploaded file once it has been read (its table lives in the session)."""
    if owner() is None or not path:
        return
    try:
        os.remove(path)
    except OSError:
        pass


def owner_folder(who: str | None) -> Path:
    """Where this visitor's zips wait to be served (removed with the visitor's data)."""
    return visitors.owner_folder(who)


def own_file(path: str | os.PathLike | None) -> str | None:
    """Public mode: a file made for this visitor (a zip, the misclassified rows, an Explain-a-file
    output) copied into gradio's cache now, so its served path is known, and recorded as this
    visitor's: ``ZipGuard`` serves it only to the browser whose token made it. The original is
    removed. Local mode (or outside an app's event): the path as it is."""
    who = owner()
    if who is None or path is None:
        return None if path is None else str(path)
    from gradio import processing_utils
    from gradio.context import LocalContext

    blocks, app = LocalContext.blocks.get(None), _app()
    if blocks is None or app is None:
        return str(path)
    cached = str(Path(processing_utils.save_file_to_cache(path, blocks.GRADIO_CACHE)).resolve())
    Path(path).unlink(missing_ok=True)
    try:
        Path(path).parent.rmdir()  # the fresh temporary folder it was made in, when now empty
    except OSError:
        pass
    app.add_zip(cached, who)
    return cached


def keep_zip(path: Path) -> str:
    """Public mode: a run's fresh zip served to this visitor only (``own_file``); outside an app's
    event it goes to the visitor's own temporary folder."""
    who = owner()
    if who is None:
        return str(path)
    from gradio.context import LocalContext

    if LocalContext.blocks.get(None) is not None and _app() is not None:
        return own_file(path)
    folder = owner_folder(who)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.zip"):
        if time.time() - old.stat().st_mtime > ZIP_KEEP_S:
            old.unlink(missing_ok=True)
    dest = folder / Path(path).name
    shutil.move(str(path), dest)
    shutil.rmtree(Path(path).parent, ignore_errors=True)
    return str(dest)


def delete_run(run: str | None) -> str:
    if not public():
        raise core.InputError("Deleting runs from the page is for the public mode; locally, delete the folder "
                              "under models/runs/.")
    name = visitors.delete_run(runs_dir(), run, owner())
    core.clear_cache()
    return f"Deleted **{esc(name)}**."


def delete_my_data(markdown: bool = True) -> str:
    if not public():
        raise core.InputError("There is no per-visitor data outside public mode (BERTVIZ_PUBLIC=1): locally, "
                              "delete folders under models/runs/ yourself.")
    who = owner()
    app = _app()
    cached = [Path(p).parent for p in app.pop_zips(who)] if app is not None else []
    removed = service.delete_visitor_data(app_settings().models_dir, who, [owner_folder(who), *cached])
    core.clear_cache()
    return service.deleted_message(removed, esc if markdown else str)


# --------------------------------------------------------------------------- page wiring
def register(demo: gr.Blocks, settings: Settings, limits: visitors.Limits | None = None):
    """Public mode: the browser's owner token (made on its first visit) mapped to this session on page
    load. Returns the load event (``on_page_load`` chains after it), or None in local mode."""
    if not settings.public:
        return None
    demo.bertviz_visitors = Visitors(limits or visitors.Limits.from_settings(settings))
    token = gr.BrowserState(None, storage_key=STORAGE_KEY, secret=SECRET)

    def on_load(value, request: gr.Request):
        if not visitors.valid_token(value):
            value = visitors.new_token()
        demo.bertviz_visitors.register(request.session_hash, visitors.owner_hash(value))
        return value

    demo.bertviz_owner_ready = demo.load(on_load, inputs=[token], outputs=[token], api_visibility="private",
                                         queue=False, show_progress="hidden")
    # the same token as a cookie, so this browser's zip downloads (plain GETs) say whose they are
    demo.bertviz_owner_ready.then(None, inputs=[token], js=f"(t) => {{ document.cookie = '{COOKIE}=' + t + "
                                  "'; path=/; SameSite=Strict'; }")
    return demo.bertviz_owner_ready


def on_page_load(demo: gr.Blocks, fn, outputs, inputs=None, **event) -> None:
    """``demo.load(fn)``, run after the owner is known in public mode; ``event``: the event's other
    arguments (default: not queued)."""
    event = {"api_visibility": "private", "queue": False, **event}
    ready_event = getattr(demo, "bertviz_owner_ready", None)
    if ready_event is not None:
        ready_event.then(fn, inputs=inputs, outputs=outputs, **event)
    else:
        demo.load(fn, inputs=inputs, outputs=outputs, **event)


# --------------------------------------------------------------------------- the sweeper
def start_sweeper(models_dir: Path, ttl_s: float, every_s: float | None = None) -> threading.Event:
    """A daemon thread removing visitors' runs not opened for ``ttl_s`` (every ``every_s``, default
    min(10 min, ttl / 4)); set the returned event to stop it."""
    stop = threading.Event()
    every = every_s or max(1.0, min(600.0, ttl_s / 4))

    def loop():
        while not stop.wait(every):
            try:
                removed = visitors.sweep(Path(models_dir) / "runs", ttl_s)
                evaluation_runs.sweep(models_dir, ttl_s)  # visitors' evaluations not opened for as long
            except Exception:  # noqa: BLE001 - a failed sweep must not stop the next one
                log.exception("the run sweeper failed")
                continue
            if removed:
                core.clear_cache()
                log.info("removed %d run(s) not opened for %.0f h", len(removed), ttl_s / 3600)

    threading.Thread(target=loop, name="bertviz-sweeper", daemon=True).start()
    return stop


# --------------------------------------------------------------------------- files served to their owner only
class ZipGuard:
    """ASGI middleware (``mount`` adds it in public mode): a visitor's file (``own_file``: a run's zip,
    misclassified rows, an Explain-a-file output) in gradio's cache is served
    only to a request carrying the token of the visitor it was made for (the ``bertviz_owner``
    cookie the page sets, or the X-Bertviz-Owner header); anyone else gets 404, as for no file."""

    def __init__(self, app, demo):
        self.app, self.demo = app, demo

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "http" and "/file=" in scope.get("path", ""):
            vis = getattr(self.demo, "bertviz_visitors", None)
            asked = scope["path"].split("/file=", 1)[1]
            try:
                key = str(Path(asked).resolve())
            except (OSError, ValueError):
                key = asked
            made_for = vis.zips.get(key) if vis is not None else None
            if made_for is not None and _token_owner(scope) != made_for:
                body = b'{"detail": "File not found."}'
                await send({"type": "http.response.start", "status": 404,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _token_owner(scope) -> str:
    from http.cookies import SimpleCookie

    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
    token = headers.get(HEADER.lower())
    if not token and headers.get("cookie"):
        jar = SimpleCookie()
        try:
            jar.load(headers["cookie"])
        except Exception:  # noqa: BLE001 - a malformed cookie header carries no token
            jar = SimpleCookie()
        token = jar[COOKIE].value if COOKIE in jar else None
    return visitors.owner_hash(token)
