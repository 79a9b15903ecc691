"""Make the README's pictures: docs/screenshot.png (the explorer after one analysis) and docs/finetune.png
(the Fine-tune tab after a short run), taken from the app served on loopback and driven by Playwright with
the system Chromium.

    python -m bertviz_app build-default       # once: the model the pictures show
    python scripts/readme_images.py           # writes docs/screenshot.png and docs/finetune.png
    python scripts/readme_images.py --model PATH --out DIR   # another model folder, another folder

Tests never write these files (tests/test_browser.py runs this script's functions into a temporary folder).
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
TEXT = "A gorgeous, moving film: a joy from start to finish."
TIMEOUT_MS = 300_000
POS = ["good", "great", "gorgeous", "moving", "fun", "a joy"]
NEG = ["bad", "awful", "tedious", "a slog", "joyless", "not fun"]


def reviews_csv(path: Path, n: int = 48, seed: int = 0) -> Path:
    """A small labelled table to fine-tune on (review, sentiment), half positive."""
    rng = random.Random(seed)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["review", "sentiment"])
        for i in range(n):
            pos = i % 2 == 1
            a, b = rng.sample(POS if pos else NEG, 2)
            w.writerow([f"the film was {a} , {b} {'!' * (i % 4)}", "positive" if pos else "negative"])
    return path


def new_page(browser):
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return page


def explorer_image(browser, url: str, out: Path, text: str = TEXT) -> Path:
    """The Predict tab after analysing ``text``, once its tokens and probability bars are drawn."""
    from playwright.sync_api import expect


    page = new_page(browser)
    try:
        page.goto(url)
        page.locator("#bv-text textarea").fill(text)
        page.locator("#bv-analyze").click()
        page.wait_for_selector("#bv-predict-tokens .bv-tok")
        page.wait_for_selector("#bv-prob-bar .js-plotly-plot .barlayer")
        expect(page.locator("#bv-label")).to_contain_text("%", timeout=TIMEOUT_MS)
        page.screenshot(path=str(out), full_page=True)
    finally:
        page.context.close()
    return out


def finetune_image(browser, url: str, out: Path, base: str, table: Path, epochs: int = 3) -> Path:
    """The Fine-tune tab after training ``base`` on ``table``, once its curves and confusion matrix are drawn."""
    from playwright.sync_api import expect

    page = new_page(browser)
    try:
        page.goto(url)
        page.get_by_role("tab", name="Fine-tune").click()
        page.locator("#bv-ft-upload input[type=file]").set_input_files(str(table))
        expect(page.locator("#bv-ft-report")).to_contain_text("Ready to train", timeout=TIMEOUT_MS)
        field = page.locator("#bv-ft-base input")
        field.fill(base)
        field.press("Enter")
        page.locator("#bv-ft-name textarea, #bv-ft-name input").first.fill("readme-run")
        page.get_by_text("Advanced").click()
        page.locator("#bv-ft-epochs textarea, #bv-ft-epochs input").first.fill(str(epochs))
        page.locator("#bv-ft-start").click()
        expect(page.locator("#bv-ft-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
        page.wait_for_selector("#bv-ft-curves .js-plotly-plot .scatterlayer .trace")
        page.wait_for_selector("#bv-ft-confusion .js-plotly-plot .heatmaplayer")
        expect(page.locator("#bv-ft-metrics")).to_contain_text("Accuracy", timeout=TIMEOUT_MS)
        page.locator("#bv-ft-status").scroll_into_view_if_needed()
        page.screenshot(path=str(out), full_page=True)
    finally:
        page.context.close()
    return out


def make_images(model: str, out_dir: Path, models_dir: Path | None = None, browser=None, epochs: int = 3) -> list[Path]:
    """Both pictures of the app serving ``model`` (a registry name in ``models_dir``, or a model folder), written
    to ``out_dir``. The app's registry is a temporary folder (``models_dir``'s models linked into it), so the
    fine-tune's run is never saved into the real one."""
    from bertviz_app.config import Settings
    from bertviz_app.serve import server

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bertviz-readme-") as tmp:
        registry = Path(tmp) / "models"
        registry.mkdir()
        for entry in sorted(Path(models_dir).iterdir()) if models_dir is not None else []:
            if entry.is_dir() and entry.name != "runs" and (entry / "config.json").is_file():
                (registry / entry.name).symlink_to(entry.resolve(), target_is_directory=True)
        table = reviews_csv(Path(tmp) / "reviews.csv")
        settings = Settings(models_dir=registry, host="127.0.0.1", port=_free_port())
        with server.start(settings, model) as running:
            if browser is not None:
                return [explorer_image(browser, running.url, out_dir / "screenshot.png"),
                        finetune_image(browser, running.url, out_dir / "finetune.png", model, table, epochs)]
            from playwright.sync_api import sync_playwright

            with sync_playwright() as p:
                b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                try:
                    return [explorer_image(b, running.url, out_dir / "screenshot.png"),
                            finetune_image(b, running.url, out_dir / "finetune.png", model, table, epochs)]
                finally:
                    b.close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help="a registry name in --models-dir, or a model folder")
    ap.add_argument("--models-dir", type=Path, default=ROOT / "models", help="the registry (default: models/)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs", help="where the two PNGs go (default: docs/)")
    args = ap.parse_args(argv)
    if str(ROOT) not in sys.path:  # run as a file from a checkout where the package is not installed
        sys.path.insert(0, str(ROOT))
    if args.model == "default" and not (args.models_dir / "default" / "config.json").is_file():
        print("models/default is not built: run `python -m bertviz_app build-default` first, or pass --model PATH",
              file=sys.stderr)
        return 2
    for path in make_images(args.model, args.out, args.models_dir):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
