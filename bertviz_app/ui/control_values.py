"""The explorer's shared controls: what they offer (the target's "predicted class", the baselines,
the method names, the whole-document stride slider) and how their values become the core's arguments."""

from __future__ import annotations

import gradio as gr
import numpy as np

import bertviz_app as core

PREDICTED = "(predicted class)"
BASELINE_CHOICES = [
    ("[PAD] tokens", "pad"),
    ("[MASK] tokens", "mask"),
    ("[UNK] tokens", "unk"),
    ("zero word vectors", "zero"),
]
# What the page calls each attribution method (methods.METHODS' names; "ig" is explain_csv's short name)
METHOD_LABELS = core.METHOD_LABELS  # one table of method names, shared with the core's readings
# relative convergence delta above which the attribution gets a warning, and the one "choose the
# steps automatically" guarantees: the core's default for everyone (library, CLI, API)
DELTA_WARN = core.DEFAULT_TOLERANCE


def target_arg(target: str | None) -> str | None:
    return None if not target or target == PREDICTED else target


def stride_slider(elem_id: str, scale: int) -> gr.Slider:
    """The whole-document parts' stride control (0-256, predict's 128); ``window_stride`` reads it."""
    return gr.Slider(0, 256, value=128, step=1, label="Tokens shared by neighbouring windows (stride)",
                     elem_id=elem_id, scale=scale)


def window_stride(lm: core.LoadedModel, value) -> int:
    """The whole-document parts' stride slider (0-256) -> the stride read: at most half the model's
    length, as predict allows (None: predict's 128)."""
    return min(int(value if value is not None else 128), lm.max_length // 2)


def tolerance_arg(auto: bool) -> float | None:
    """The UI's "choose the steps automatically": a guaranteed relative delta of DELTA_WARN."""
    return DELTA_WARN if auto else None


def trust_md(a, min_change: float) -> str:
    """The end of a log-probability explanation's line (a tagger's entity, a reader's span): the delta as a share of
    the change, the steps, and the warnings (the same words for both)."""
    rel = a.relative_delta
    if rel is None or not np.isfinite(rel):
        return f" · **steps** {a.n_steps}.  \n**Warning:** the text and the baseline give the same F, so the " \
            "scores cannot be checked."
    steps = (f"adaptive, for a relative delta within {a.tolerance:.0%}" if a.tolerance is not None else "fixed")
    line = f" ({rel:.1%} of the change) · **steps** {a.n_steps} ({steps})."
    scale = core.colour_scale(a, min_change, output="log-probability")
    if scale.too_small:
        line += f"  \n**Warning: the change is too small to read anything into** (below {scale.threshold:g})."
    if rel > DELTA_WARN:
        return line + (f"  \n**Warning: take these scores with caution.** The integral was approximated with too few "
                       f"steps ({rel:.0%} error, above {DELTA_WARN:.0%}). Raise n_steps (or choose them "
                       "automatically) and explain again.")
    return line + "  \n**Converged:** the scores account for the whole change."
