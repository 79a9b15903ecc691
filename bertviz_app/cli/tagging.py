"""tag: a token classification model's entities in each text (labels per word-piece, merged into words and
entities with character offsets)."""

from __future__ import annotations

from collections.abc import Callable

from .common import model_from_args, print_json, read_texts

AGGREGATION_NAMES = ("simple", "first", "average", "max")  # tagging.AGGREGATIONS, without importing torch for --help


def cmd_tag(args) -> int:
    """tag TEXT...: one JSON object per text (--json), else each text's entities one per line."""
    from .. import tag  # lazily: `bertviz-app --help` imports none of the core

    lm = model_from_args(args)
    texts = read_texts(args)
    results = tag(lm, texts, aggregation=args.aggregation, window=not args.no_window, stride=args.stride)
    for i, t in enumerate(results):
        if args.json:
            print_json(t.to_dict())
            continue
        if len(results) > 1:  # a header per text, a blank line between texts
            print(("\n" if i else "") + f"# text {i + 1}: {t.text[:60]}" + ("..." if len(t.text) > 60 else ""))
        if not t.entities:
            print("(no entities)")
        for e in t.entities:
            print(f"{e.label:<10} {e.score:.3f}  {e.start:>5}-{e.end:<5}  {e.text}")
        if t.truncated:
            print(f"(truncated: the model read the first {len(t.tokens)} word-pieces; drop --no-window to read it all)")
    return 0


def register(add: Callable) -> None:
    """The arguments of tag (``add`` gives it the common ones)."""
    p = add("tag", cmd_tag, "entities in each text, from a token classification (...ForTokenClassification) model")
    p.add_argument("text", nargs="*", help="texts to tag; none or '-' reads one per line from stdin")
    p.add_argument("--aggregation", default="simple", choices=AGGREGATION_NAMES,
                   help="simple: entities from word-pieces; first, average or max: each word's pieces merged first "
                        "(as transformers' aggregation_strategy; default %(default)s)")
    p.add_argument("--stride", type=int, default=None,
                   help="tokens shared by neighbouring windows of a long text (default: a quarter of the window)")
    p.add_argument("--no-window", action="store_true",
                   help="cut a long text at the model's length instead of reading it in overlapping windows")
