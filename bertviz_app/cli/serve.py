"""serve: the web app (the same entry point as ``python app.py``). Its own module because it is the
last command of ``bertviz-app --help``'s list, after evaluate and layers."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..config import Settings
from .common import fail


def cmd_serve(args) -> int:
    import dataclasses

    from ..serve.server import serve  # lazily: the server's modules (FastAPI) load only for serve

    logging.getLogger("bertviz_app").setLevel(logging.INFO)  # the default model's build progress in this terminal
    settings = dataclasses.replace(args.settings, host=args.host, port=args.port)
    try:  # the same entry point as `python app.py`
        serve(settings, model=args.model)
    except SystemExit as exc:  # cannot listen on that address
        if isinstance(exc.code, str):
            return fail(exc.code.replace("set BERTVIZ_PORT / BERTVIZ_HOST", "pass --port / --host"))
        raise
    return 0


def register(add: Callable, settings: Settings) -> None:
    """The arguments of serve; --host and --port default to ``settings``."""
    p = add("serve", cmd_serve, "serve the web app")
    p.add_argument("--host", default=settings.host,
                   help="address to listen on (default: %(default)s; 0.0.0.0 exposes the app to the network)")
    p.add_argument("--port", type=int, default=settings.port)
