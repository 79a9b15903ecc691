"""A page within a second of ``python app.py``: importing gradio, torch and transformers and
building the Blocks app takes 10 s on a quiet 2-core machine and much longer on a busy one. Until
the real app listens, this standard-library server answers every request on the same address with
a small page saying the app is starting, with the default model's build progress. The page polls
and reloads itself into the real app as soon as that answers (no refresh to press).

HTTP status 503 with ``Retry-After``, so health checks and API clients see "not ready yet".
"""

from __future__ import annotations

import html
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..models.build_job import read_status

__all__ = ["StartupPage", "MARKER"]

MARKER = "X-Bertviz-Starting"  # header of the placeholder's answers; the real app's lack it

_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>BERT classifier explorer: starting</title>
<style>body{{font-family:system-ui,sans-serif;max-width:46rem;margin:3rem auto;padding:0 1rem;color:#222}}
pre{{background:#f4f4f5;padding:.6rem;white-space:pre-wrap}}</style></head><body>
<h1>BERT classifier explorer</h1>
<p><b>The app is starting</b> (loading its libraries); this page turns into the app by itself in a few seconds.</p>
<div id="bv-startup-status">{status}</div>
<script>
async function poll() {{
  try {{
    const r = await fetch(location.href, {{cache: "no-store"}});
    if (!r.headers.get("{marker}")) {{ location.reload(); return; }}
    const doc = new DOMParser().parseFromString(await r.text(), "text/html");
    document.getElementById("bv-startup-status").innerHTML = doc.getElementById("bv-startup-status").innerHTML;
  }} catch (e) {{}}  // the real app is taking over the port: try again
  setTimeout(poll, 1000);
}}
setTimeout(poll, 1000);
</script></body></html>"""


class _QuietServer(ThreadingHTTPServer):
    """A browser that hangs up before reading the answer (a reload, a closed tab, the page's own poll
    cut short by the switch to the real app) is routine, not a traceback in the terminal."""

    allow_reuse_address = True
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # BrokenPipeError, ConnectionResetError, ...Aborted
            return
        super().handle_error(request, client_address)


def _status_html(models_dir: Path | None) -> str:
    status = read_status(models_dir)
    if status.state == "built":
        return "<p>The default model is built.</p>"
    text = (f"<p id=\"bv-startup-build\"><b>Building the default model</b> in the background: "
            f"{html.escape(status.line())}</p>")
    if status.state != "building":
        text = f"<p id=\"bv-startup-build\">{html.escape(status.line())}</p>"
    if status.log:
        text += "<pre>" + html.escape("\n".join(status.log[-6:])) + "</pre>"
    return text


class StartupPage:
    """``with StartupPage(host, port, models_dir): ...import and build the real app...``: serves
    the placeholder until the block ends (then the port is free for the real app)."""

    def __init__(self, host: str, port: int, models_dir: Path | None = None, show_build: bool = True):
        models = models_dir

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                body = _PAGE.format(status=_status_html(models) if show_build else "", marker=MARKER).encode()
                self.send_response(503)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("Retry-After", "2")
                self.send_header(MARKER, "1")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, *args):  # quiet: the terminal shows the build's progress instead
                pass

        self.server = _QuietServer((host, port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="startup-page", daemon=True)
        self.closed = False

    def __enter__(self) -> StartupPage:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()
