"""Entry point: `python app.py` serves the web UI and the JSON API on settings.host:settings.port
(127.0.0.1:7860 unless BERTVIZ_HOST/BERTVIZ_PORT say otherwise).

Thin on purpose: the settings are read from the environment once, here, and handed to
``bertviz_app.serve.server.serve`` (the same entry point as ``bertviz-app serve``), which answers with a
start-up page at once, starts the default model's background build if it is missing and serves the
app. Importing this module starts nothing.
"""

from __future__ import annotations


def main() -> None:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP request otherwise
    from bertviz_app.config import Settings

    try:
        settings = Settings.from_env()
    except ValueError as exc:  # a bad BERTVIZ_* value: one clear line
        raise SystemExit(str(exc)) from None
    from bertviz_app.serve.server import serve

    serve(settings)


if __name__ == "__main__":
    main()
