"""An exported explanation opens offline: file:// in Chromium with every network request refused."""

from __future__ import annotations

import os

import numpy as np
import pytest

from conftest import CHROMIUM

if not os.path.exists(CHROMIUM):
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (not installed here)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

import bertviz_app as core  # noqa: E402
from bertviz_app.results import Attribution, TokenInfo  # noqa: E402


def test_exported_html_renders_coloured_tokens_offline(browser, tmp_path):
    text = "a great film <img/src=x/onerror=alert(1)>"  # four words, one of them hostile
    words = text.split()
    offsets, start = [], 0
    for w in words:
        start = text.index(w, start)
        offsets.append((start, start + len(w)))
        start += len(w)
    info = TokenInfo(tokens=("[CLS]", *words, "[SEP]"), offsets=((0, 0), *offsets, (0, 0)),
                     sequence_ids=(None, *[0] * len(words), None), text=text, pair=None, truncated=False)
    attr = Attribution(info=info, scores=np.array([0, 0.05, 0.5, 0.1, -0.05, 0.0], dtype=np.float32), target="positive",
                       target_index=1, output="prob", f_x=0.9, f_baseline=0.3, delta=0.0, n_steps=50, baseline="pad")
    page_file = core.write_html(tmp_path / "why.html", attr, model="tiny")

    ctx = browser.new_context(offline=True)
    requests, dialogs = [], []
    ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else
              (requests.append(route.request.url), route.abort()))
    page = ctx.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(page_file.as_uri())
    spans = page.locator(".bv-line .bv-tok")
    assert spans.count() == len(info.tokens)
    great = spans.nth(2)
    assert great.inner_text() == "great"
    colour = great.evaluate("e => getComputedStyle(e).backgroundColor")  # strong green: 0.5 of a 0.6 change
    assert colour.startswith("rgba(44, 160, 44, 0.7")
    assert page.locator(".bv-line").inner_text().count("<img") == 1  # the text shows, nothing was injected
    assert page.locator("img").count() == 0 and not dialogs and not requests
    ctx.close()
