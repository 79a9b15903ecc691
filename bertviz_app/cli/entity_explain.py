"""explain TEXT on a tagger: why the model tags an entity (``--entity K``) or a word-piece (``--token I``) as it
does (``interpret.entity_attribution``). ``explain`` (``analyses.py``) hands over here when the model is a token
classifier or either option is given; a sequence classifier given them is refused with what to do instead."""

from __future__ import annotations

from .common import explain_by_method, model_from_args, one_text

# explain's options that draw or compare a classifier's explanation: not (yet) for a tagger's
CLASSIFIER_ONLY = (("compare", "--compare"), ("html", "--html"), ("out", "--out"), ("svg", "--svg"), ("png", "--png"))
TOP_WORDS = 10


def register_options(p) -> None:
    """--entity, --token, --label and --objective on explain's parser ``p``."""
    p.add_argument("--entity", type=int, default=None, metavar="K",
                   help="a tagger: explain the text's K-th entity (from 0, in the order tag lists them; default: "
                        "every entity)")
    p.add_argument("--token", type=int, default=None, metavar="I",
                   help="a tagger: explain the label of the I-th word-piece (from 0, special tokens left out), e.g. "
                        "why it is O")
    p.add_argument("--label", default=None,
                   help="with --token: the label to explain there (default: the predicted one)")
    p.add_argument("--objective", default="logprob", choices=["logprob", "prob"],
                   help="a tagger: explain the sum of the entity's pieces' log-probabilities of its labels (default), "
                        "or its exponent, the probability of the labelled span; with --question: the answer span's "
                        "log p(start) + log p(end), or p(start) x p(end)")


def explains_entities(args, lm) -> bool:
    """Does ``explain`` hand over to ``cmd_explain_entity``: a tagger, or --entity/--token given?"""
    from ..models.heads import TOKEN_CLASSIFICATION  # lazily: `bertviz-app --help` imports none of the core

    return lm.head is TOKEN_CLASSIFICATION or args.entity is not None or args.token is not None


def cmd_explain_entity(args, lm=None, text: str | None = None) -> int:
    """explain TEXT --entity K / --token I: one record per target, as JSON lines (--json) or the top words."""
    # lazily: `bertviz-app --help` imports none of the core
    from ..errors import InputError
    from ..interpret.entity_attribution import explain_entities, occlude_entities
    from ..interpret.entity_methods import sample_entities
    from ..models.heads import TOKEN_CLASSIFICATION

    lm = model_from_args(args) if lm is None else lm
    text = one_text(args) if text is None else text
    if lm.head is not TOKEN_CLASSIFICATION:
        raise InputError(f"--entity and --token explain a tagger's entities and word-pieces; {lm.name} is a "
                         f"{lm.head.name} model (labels {', '.join(lm.labels[:8])}): drop them to explain its class.")
    used = [flag for name, flag in CLASSIFIER_ONLY if getattr(args, name, None)]
    if used:
        raise InputError(f"{', '.join(used)} draw or compare a classifier's explanation; for a tagger use --json.")
    if args.label is not None and args.token is None:
        raise InputError("--label names the label explained at a word-piece: give --token I with it.")
    common = dict(token=args.token, label=args.label, target=args.objective, baseline=args.baseline,
                  stride=getattr(args, "stride", None))
    return explain_by_method(args, lambda **steps: explain_entities(lm, text, args.entity, **steps, **common),
                             lambda: occlude_entities(lm, text, args.entity, **common), "a tagger", print_record,
                             lambda **sampling: sample_entities(lm, text, args.entity, **sampling, **common))


def print_record(rec, first: bool = True) -> None:
    """One target: what is explained, F at the text and the baseline, the delta, the top words by |score|."""
    t = rec.target
    what = (f"entity {t.entity} {t.text!r} ({t.label})" if t.kind == "entity"
            else f"token {t.token} {t.text!r} as {t.label}")
    print(("" if first else "\n") + f"{what}  characters {t.start}-{t.end}  labels {' '.join(t.piece_labels)}")
    print(f"  {rec.method}, F = {rec.objective} of the labels: F(x)={rec.f_x:.4f}  F(baseline)={rec.f_baseline:.4f}  "
          f"baseline={rec.baseline}" + (f"  window {rec.window}" if rec.window else ""))
    if rec.delta is not None:
        steps = f"chosen for a relative delta <= {rec.tolerance:g}" if rec.tolerance is not None else "fixed"
        print(f"  sum of attributions {float(rec.scores.sum()):+.4f}  convergence delta {rec.delta:+.2e} "
              f"({rec.relative_delta:.1%} of F(x)-F(baseline)); n_steps={rec.n_steps} ({steps})")
    top = sorted(rec.words, key=lambda w: -abs(w.score))[:TOP_WORDS]
    width = max((len(w.word) for w in top), default=4)
    print(f"  top words (of {len(rec.words)}):")
    for w in top:
        print(f"    {w.word:<{width}}  {w.start:>5}-{w.end:<5} {w.score:+.4f}")
