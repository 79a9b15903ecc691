"""The one door for files a visitor sends: only a file uploaded to gradio's upload folder is read.

Three guards stand in line, each enough alone (tests/test_file_doors.py turns the ones before it off):

- ``PathGuard``: a request whose JSON names a file that ``upload_path`` refuses is answered 400 before
  gradio sees it (one log line, no traceback, no event queued);
- gradio's own: an API call's ``FileData`` input is accepted only when its ``path`` lies in the upload
  folder, and never under ``blocked_paths``. gradio runs that check only once its Blocks "has launched",
  and ``gr.mount_gradio_app`` (6.31) never sets ``Blocks.has_launched``: mounted on FastAPI, a call
  like ``POST /gradio_api/call/evaluate`` with ``{"path": "models/evaluations/.../predictions.csv"}``
  had gradio copy that server file into its cache and hand it to the handler as an upload.
  ``enforce_gradio_checks`` turns the check on; ``blocked_paths`` keeps the models folder and the
  app's own files out even of what gradio would serve or copy.
- the app's: every handler that reads a file takes its path through ``upload_path``, which accepts
  only a regular file inside the upload folder (symlinks resolved first) that, in an event, gradio's
  upload route wrote (``Blocks.upload_file_set``: a file gradio copied there is not one), and refuses
  anything else with one message that says nothing of the file (not its rows, not whether it exists).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from gradio.context import LocalContext
from gradio.utils import get_upload_folder
from gradio_client.utils import is_file_obj_with_meta

import bertviz_app as core
from bertviz_app.config import Settings

__all__ = ["NOT_UPLOADED", "PathGuard", "blocked_paths", "enforce_gradio_checks", "refused_paths", "upload_path"]

log = logging.getLogger("bertviz_app.ui")

NOT_UPLOADED = ("That file was not uploaded with this request: send the file itself (in the page, or with "
                "gradio_client's handle_file(\"reviews.csv\")), not a path on the server.")
PACKAGE = Path(core.__file__).resolve().parent


def blocked_paths(settings: Settings) -> list[str]:
    """What gradio must never copy, serve or accept as an input: the models folder (every visitor's runs
    and stored evaluations) and the app's own code and data."""
    return [str(Path(settings.models_dir).resolve()), str(PACKAGE)]


def enforce_gradio_checks(demo) -> None:
    """Have gradio check the files of a mounted app's events as it does for a launched one (see the
    module's docstring: ``mount_gradio_app`` leaves ``has_launched`` False, which skips the check)."""
    demo.has_launched = True


def upload_path(value) -> str:
    """The server path of an uploaded file, given as gradio hands it over: a path string, or a
    ``FileData`` (object or dict, as gradio_client's ``handle_file`` sends). Refused (``InputError``,
    ``NOT_UPLOADED``) unless it is a regular file inside gradio's upload folder."""
    path = value.get("path") if isinstance(value, dict) else getattr(value, "path", value)
    path = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(path, str) or not path.strip():
        raise core.InputError("Send a file: a .csv, .tsv or .txt with a header row (in the page, or with "
                              "gradio_client's handle_file(\"reviews.csv\")).")
    root = Path(get_upload_folder()).resolve()
    try:
        resolved = Path(path).resolve()
        ok = resolved.is_relative_to(root) and resolved != root and resolved.is_file()
    except (OSError, ValueError):
        ok = False
    # In an event, the file must also be one that gradio's upload route wrote: a server file that gradio
    # copied into the same folder (what ``enforce_gradio_checks`` stops) is in the folder, but not in this set.
    uploaded = getattr(LocalContext.blocks.get(None), "upload_file_set", None)
    if ok and uploaded is not None:
        ok = path in uploaded or str(resolved) in uploaded
    if not ok:
        raise core.InputError(NOT_UPLOADED)
    return str(resolved)


def refused_paths(data) -> list[str]:
    """The file paths in a gradio request body (its ``FileData`` objects, anywhere in the JSON) that
    ``upload_path`` would refuse."""
    found: list[str] = []

    def walk(obj) -> None:
        if is_file_obj_with_meta(obj):
            try:
                upload_path(obj)
            except core.InputError:
                found.append(str(obj.get("path")))
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(data)
    return found


class PathGuard:
    """ASGI middleware (``mount`` adds it in both modes): a request to gradio's API (``/gradio_api/call/...``,
    ``/gradio_api/queue/join``, ``/gradio_api/run/...``) whose JSON names a file that was not uploaded is
    answered 400 with ``NOT_UPLOADED`` before gradio sees it, so no event is queued, nothing is copied, and
    the log gets one line without the path instead of gradio's traceback. Bodies over ``MAX_SCANNED`` bytes
    go on unread: gradio's own check (``enforce_gradio_checks``) and ``upload_path`` in each handler still
    refuse them."""

    MAX_SCANNED = 32 * 2**20

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "") if scope.get("type") == "http" else ""
        if scope.get("method") != "POST" or "/gradio_api/" not in path or path.endswith("/upload"):
            return await self.app(scope, receive, send)
        chunks, size, more = [], 0, True
        while more and size <= self.MAX_SCANNED:
            message = await receive()
            if message["type"] != "http.request":
                return await self.app(scope, replay([message]), send)
            chunks.append(message)
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        if not more:
            try:
                refused = refused_paths(json.loads(b"".join(m.get("body", b"") for m in chunks) or b"null"))
            except ValueError:
                refused = []
            if refused:
                log.info("Refused %d file path(s) not uploaded with the request to %s", len(refused), path)
                body = json.dumps({"error": NOT_UPLOADED, "detail": NOT_UPLOADED}).encode()
                await send({"type": "http.response.start", "status": 400,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        return await self.app(scope, replay(chunks, receive), send)


def replay(messages: list[dict], then=None):
    """An ASGI ``receive`` that hands back ``messages`` already read, then reads on from ``then``."""
    pending = list(messages)

    async def receive():
        if pending:
            return pending.pop(0)
        if then is None:
            return {"type": "http.disconnect"}
        return await then()

    return receive
