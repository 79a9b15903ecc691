"""Entry point: `python app.py` serves the web UI on settings.host:settings.port
(127.0.0.1:7860 unless BERTVIZ_HOST/BERTVIZ_PORT say otherwise).

Thin on purpose: build the offline default model if it is missing (printing progress), then
launch the Gradio app from bertviz_app.ui. Importing this module starts nothing.
"""

from __future__ import annotations


def main() -> None:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP request otherwise
    from bertviz_app import ensure_default_model

    ensure_default_model()
    from bertviz_app import ui

    ui.launch()


if __name__ == "__main__":
    main()
