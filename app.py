"""Entry point: `python app.py` serves the web UI on settings.host:settings.port
(127.0.0.1:7860 unless BERTVIZ_HOST/BERTVIZ_PORT say otherwise).

Thin on purpose: start building the offline default model in a background process if it is
missing (progress on the page and in this terminal), then serve the Gradio app from
bertviz_app.ui at once. Importing this module starts nothing.
"""

from __future__ import annotations


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> None:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP request otherwise
    import signal

    signal.signal(signal.SIGTERM, _interrupt)  # docker stop / kill: exit like Ctrl-C, stopping the build child
    from bertviz_app.allocator import tune_allocator

    tune_allocator()  # before any thread starts, so its arena limit holds for all of them
    from bertviz_app import Settings, start_default_build
    from bertviz_app.startup_page import StartupPage

    settings = Settings.from_env()  # the entry point reads the environment, once
    try:  # a page at once, while gradio, torch and the app load (10 s quiet, minutes on a busy CPU)
        page = StartupPage(settings.host, settings.port, settings.models_dir)
    except OSError as exc:
        raise SystemExit(f"Cannot listen on {settings.host}:{settings.port} ({exc.strerror}): "
                         "stop what uses that port or set BERTVIZ_PORT / BERTVIZ_HOST.") from None
    with page:
        logging.getLogger("bertviz_app").info("starting; the page answers at http://%s:%d/ now", settings.host,
                                              settings.port)
        if settings.default_model == "default":
            logging.getLogger("bertviz_app.build").info("%s", start_default_build(settings).line())
        from bertviz_app import ui

        ui.launch(before_serving=page.close)


if __name__ == "__main__":
    main()
