"""Text the tabs write into Markdown and HTML: user text escaped (``esc``) and the page's own CSS
(coloured tokens, warnings, the Analyze button while it runs, table headers)."""

from __future__ import annotations

import html


def esc(text: object) -> str:
    """Escape user text for Markdown output: HTML (Markdown passes raw HTML through) and Markdown
    syntax. Quotes stay as they are: an escaped &#x27; would then have its '#' escaped and show
    up literally, and quotes are harmless outside attributes."""
    s = html.escape(str(text), quote=False)
    for ch in "\\`*_[]|#":
        s = s.replace(ch, "\\" + ch)
    return s


CSS = """
.bv-tokens { line-height: 2.1; font-size: 1.05em; }
.bv-tok { padding: 2px 4px; border-radius: 4px; margin: 0 1px; white-space: pre-wrap; }
.bv-legend { margin-top: 6px; font-size: 0.85em; color: var(--body-text-color-subdued); line-height: 1.8; }
.bv-title { font-weight: 600; margin-bottom: 4px; }
/* a question answering model's context as given (spaces and line breaks kept), its answer highlighted */
.bv-answer-context { white-space: pre-wrap; line-height: 1.7; padding: 6px 0; }
.bv-answer-mark { background: #ffd54f; color: #000; padding: 1px 2px; border-radius: 3px; }
.bv-answer-line { margin-bottom: 8px; }
.bv-warn { border-left: 4px solid #e69f00; padding: 4px 10px; margin: 6px 0; line-height: 1.5; }
/* a running Analyze shows its progress on the button: keep that text as readable as when it is enabled */
#bv-analyze:disabled { opacity: 1; filter: none; color: var(--button-primary-text-color);
                       background: var(--button-primary-background-fill); cursor: progress; }
/* table headers wrap between words, never inside one ("comprehen|siveness"): gradio's wrapped
   cells use word-break: break-word, which splits a word wider than its column */
.bv-table thead th, .bv-table thead th * { word-break: normal !important; overflow-wrap: normal !important;
                                           hyphens: manual; }
"""
