"""The translation edge between handlers and the browser or API client: errors as clear, user-safe
messages (``user_error``), event-handler wrappers that raise them (``guard``, ``guard_stream``) or say
them in a tab's status line (``to_status``, ``to_status_stream``), and a refused upload in plain words."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable

import gradio as gr

import bertviz_app as core

from .markup import esc

log = logging.getLogger("bertviz_app.ui")

UNEXPECTED = "Unexpected error while handling this request; the details are in the server log."


def user_error(exc: BaseException) -> gr.Error:
    """BertvizError -> its own (user-safe) message, logged as one line that names its kind only (the
    message may quote the visitor's rows or text); anything else -> a generic message, logged with its
    traceback. Either way gradio prints no traceback of its own (``print_exception=False``)."""
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, core.BertvizError):
        log.info("Refused a request: %s", type(exc).__name__)
        return gr.Error(str(exc), print_exception=False)
    log.error("Unexpected error in the UI", exc_info=exc)
    return gr.Error(UNEXPECTED, print_exception=False)


def guard(fn: Callable) -> Callable:
    """Wrap an event handler so only clear, user-safe messages reach the browser or API client.
    ``functools.wraps`` keeps the signature and type hints gradio reads (gr.Progress, gr.api)."""

    if inspect.iscoroutinefunction(fn):  # gradio awaits it on its event loop: the wrapper must be a coroutine too

        @functools.wraps(fn)
        async def waiting(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - this is the translation edge
                raise user_error(exc) from None

        return waiting

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            raise user_error(exc) from None

    return wrapper


def guard_stream(fn: Callable) -> Callable:
    """``guard`` for a generator handler: the wrapper is itself a generator function (gradio
    streams only those), and an error raised between yields is translated the same way."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            raise user_error(exc) from None

    return wrapper


def refusal_md(exc: BaseException, logged: bool = True) -> str:
    """An error as a tab's status line says it: a BertvizError's own message (what to fix), anything else
    the generic message (the details logged by ``user_error``; ``logged=False``: the caller raises it on to
    a ``guard``, which logs it)."""
    if logged:
        return f"**Error:** {esc(user_error(exc).message)}"
    safe = exc.message if isinstance(exc, gr.Error) else str(exc) if isinstance(exc, core.BertvizError) else UNEXPECTED
    return f"**Error:** {esc(safe)}"


def to_status(fn: Callable, status, also: Callable[[], dict] | None = None) -> Callable:
    """Wrap a page-only handler whose refusals belong in ``status`` (the tab's status line, a Markdown that
    is one of the event's outputs): an error is not raised (gradio would show a toast that vanishes and
    mark every output "Error") but said there, ``refusal_md``, and stays. ``also()``: more outputs set
    with it (a refused upload's File cleared). For handlers that return a value (``to_status_stream``
    for generators); an API endpoint keeps raising, so its callers still get the error."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            return {status: refusal_md(exc), **(also() if also else {})}

    return wrapper


def to_status_stream(fn: Callable, status, also: Callable[[], dict] | None = None) -> Callable:
    """``to_status`` for a generator handler (the wrapper is itself a generator function)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            yield {status: refusal_md(exc), **(also() if also else {})}

    return wrapper


def refused_file(path: str | None, exc: BaseException, what: str = "file") -> str:
    """Why an uploaded file was refused, in plain words (the tabs keep it for a later Start or Evaluate):
    the file's name (never its server path), why, and the fix."""
    name = str(path or "").replace("\\", "/").rsplit("/", 1)[-1] or "the file"
    return f"The {what} {name} was refused: {exc} Fix the file and upload it again."


def upload_refused(path: str | None, exc: BaseException, logged: bool = True) -> str:
    """A refused upload as a tab's status line says it (``refused_file``: a file that cannot be read is to be
    fixed and uploaded again); any other refusal as ``refusal_md`` says it. ``logged``: as ``refusal_md``'s."""
    if not isinstance(exc, core.DataError):
        return refusal_md(exc, logged)
    return f"**Error:** {esc(refused_file(path, exc))}"


class Refusal:
    """Why the last run of an API-visible handler was refused, per session (``gr.State(Refusal())``, deep-
    copied fresh for each session like ``CancelFlag``): the handler sets it and raises (its API callers get
    the error), and a page-only event after it says it in the tab's status line and clears the badges."""

    def __init__(self) -> None:
        self.message = ""

    def __deepcopy__(self, memo):
        return Refusal()
