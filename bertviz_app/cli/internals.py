"""attention and summary: what is inside the model, its context mixing layer by layer and its
parameters by component."""

from __future__ import annotations

from collections.abc import Callable

from .common import model_from_args, one_text, print_json

# mixing_measures.MEASURES, without importing torch for --help (a test checks they agree)
MEASURE_NAMES = ("raw", "norm", "value_zeroing", "alti")


def _attention_windows(args, lm, text) -> int:
    """attention --window [K]: window K's attention, and the [CLS] rows merged over the whole document."""
    from .. import attention_windows  # lazily: `bertviz-app --help` imports none of the core

    d = attention_windows(lm, text, pair=args.pair, window=args.window, stride=args.stride, measure=args.measure)
    if args.json:
        print_json(d.to_dict())
        return 0
    layers, heads, t, _ = d.maps.weights.shape
    a, b = d.spans[d.window]
    print(f"measure: {d.measure}; window {d.window} of {d.windows} (0-based; document tokens {a}-{b - 1}): {layers} "
          f"layers x {heads} heads x {t} tokens")
    top = sorted(zip(d.rollout_cls[-1], d.info.tokens), reverse=True)[:10]
    print("whole document, aggregated [CLS] row at the last layer (windows merged): "
          + ", ".join(f"{tok} {w:.3f}" for w, tok in top))
    return 0


def cmd_attention(args) -> int:
    # lazily: `bertviz-app --help` imports none of the core
    from ..interpret.mixing_measures import MEASURE_NOTES, context_mixing

    lm = model_from_args(args)
    if args.window is not None:
        return _attention_windows(args, lm, one_text(args))
    mm = context_mixing(lm, one_text(args), pair=args.pair, measure=args.measure)
    if args.json:
        print_json({**mm.to_dict(), "truncated": mm.info.truncated})
        return 0
    layers, heads, t = mm.num_layers, mm.num_heads, len(mm.tokens)
    print(f"measure: {mm.measure}. {MEASURE_NOTES[mm.measure]}")
    if mm.measure == "raw":
        print(f"{layers} layers x {heads} heads x {t} tokens; [CLS] attention (mean of heads) per layer:")
    else:
        per = f"{heads} heads" if heads > 1 else "no heads (measured per layer)"
        print(f"{layers} layers x {per} x {t} tokens; what [CLS] takes from each token per layer "
              f"({mm.measure}, rows sum to 1):")
    top5 = lambda row: ", ".join(f"{tok} {w:.2f}" for w, tok in sorted(zip(row, mm.tokens), reverse=True)[:5])  # noqa: E731
    for i, row in enumerate(mm.combined[:, 0], start=1):  # (L, T): the [CLS] row of each layer
        print(f"  layer {i:>2}: " + top5(row))
    print(f"across all layers ({'rollout' if mm.measure in ('raw', 'norm') else 'product of the layers'}): "
          + top5(mm.cls_scores))
    return 0


def cmd_summary(args) -> int:
    from .. import summary  # lazily: `bertviz-app --help` imports none of the core

    s = summary(model_from_args(args))
    if args.json:
        print_json(s.to_dict())
        return 0
    print(f"{s.name}: {s.architecture}, {s.num_layers} layers, {s.num_heads} heads, hidden {s.hidden_size}, "
          f"max length {s.max_length}, on {s.device} ({s.dtype})")
    print(f"labels: {', '.join(s.labels)}")
    width = max(24, *(len(name) for name, _ in s.components))
    for name, n in s.components:
        print(f"  {name:<{width}} {n:>12,}")
    print(f"  {'encoder':<{width}} {s.encoder_params:>12,}")
    print(f"  {s.head + ' head':<{width}} {s.classifier_params:>12,}")
    print(f"  {'total':<{width}} {s.total_params:>12,}")
    return 0


def register(add: Callable) -> None:
    """The arguments of attention and summary (``add`` gives each the common ones)."""
    p = add("attention", cmd_attention, "attention weights of every layer and head, or another context-mixing measure",
            "one")
    p.add_argument("--measure", default="raw", choices=MEASURE_NAMES,
                   help="raw (attention weights, default), norm (attention-norm), value_zeroing or alti: what a "
                        "token takes from each other token, layer by layer (docs/methods.md)")
    p.add_argument("--window", type=int, nargs="?", const=0, default=None, metavar="K",
                   help="a text longer than the model's limit: window K's attention (0-based, default 0) and the "
                        "[CLS] rows merged over the whole document")
    p.add_argument("--stride", type=int, default=None, help="with --window: tokens shared by neighbouring windows")
    add("summary", cmd_summary, "architecture and parameter counts by component")
