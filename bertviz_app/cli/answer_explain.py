"""explain --question Q --context C on a question answering model: why the model answers the span it answers (or
its start or end alone, a chosen span, "no answer"; ``interpret.span_attribution``), by Integrated Gradients (the
default), occlusion, LIME or KernelSHAP (``--method``; ``interpret.span_methods``), each record with its ERASER
faithfulness on the span's probability. ``explain`` (``analyses.py``) hands over here when --question or --context
is given, before it reads a text: none is needed."""

from __future__ import annotations

import argparse

from .common import explain_by_method, fail, model_from_args
from .entity_explain import CLASSIFIER_ONLY

TOP_WORDS = 10


def register_options(p) -> None:
    """--question, --context, --span, --start, --end and --no-answer on explain's parser ``p``."""
    p.add_argument("--question", default=None,
                   help="a question answering model: the question (with --context; no text is then needed)")
    p.add_argument("--context", default=None, help="a question answering model: the text the answer is found in")
    p.add_argument("--span", default=None, metavar="START:END",
                   help="with --question: explain this span of the context, by characters (default: the predicted "
                        "answer)")
    p.add_argument("--start", action="store_true", help="with --question: explain the span's start alone")
    p.add_argument("--end", action="store_true", help="with --question: explain the span's end alone")
    p.add_argument("--no-answer", action="store_true",
                   help="with --question: explain 'no answer' (the first position's start and end, SQuAD 2.0)")
    p.add_argument("--samples", dest="n_samples", type=int, default=argparse.SUPPRESS, metavar="N",
                   help="the same as --n-samples (with --question and --method lime or kernel_shap)")
    p.add_argument("--features", default="context", choices=["context", "both"],
                   help="with --question: whose words LIME and KernelSHAP sample, and faithfulness removes: the "
                        "context's (default; the question kept) or both the question's and the context's")


def explains_answer(args) -> bool:
    """Does ``explain`` hand over to ``cmd_explain_answer``: --question or --context given?"""
    return args.question is not None or args.context is not None


def _span(args):
    if args.no_answer:
        if args.span is not None:
            raise SystemExit(fail("--no-answer and --span each choose what is explained: give one"))
        return "no-answer"
    if args.span is None:
        return None
    a, sep, b = args.span.partition(":")
    try:
        return int(a), int(b)
    except ValueError:
        raise SystemExit(fail(f"--span takes START:END, character offsets into the context (e.g. 4:8), got "
                              f"{args.span!r}")) from None


def cmd_explain_answer(args, lm=None) -> int:
    """explain --question Q --context C: one record per part, as JSON lines (--json) or the top words."""
    # lazily: `bertviz-app --help` imports none of the core
    from ..interpret.span_attribution import explain_answer, occlude_answer
    from ..interpret.span_methods import sample_span, span_faithfulness

    if args.question is None or args.context is None:
        return fail("--question and --context go together: give both")
    if args.text and args.text != ["-"]:
        return fail("with --question and --context, give no text")
    used = [flag for name, flag in CLASSIFIER_ONLY + (("entity", "--entity"), ("token", "--token"),
                                                       ("window", "--window"))
            if getattr(args, name, None) not in (None, False)]
    if used:
        return fail(f"{', '.join(used)} are not for a question answering model's answer; use --json")
    span = _span(args)
    parts = [p for p, on in (("start", args.start), ("end", args.end)) if on] or ["span"]
    lm = model_from_args(args) if lm is None else lm
    stride, side = getattr(args, "stride", None), getattr(args, "features", "context")
    common = dict(part=parts, target=args.objective, baseline=args.baseline, stride=stride)

    def faithful(records):  # each record with its faithfulness on the span's probability
        return [Faithful(r, f) for r, f in zip(records, span_faithfulness(lm, records, side=side, stride=stride))]

    q, c = args.question, args.context
    return explain_by_method(args, lambda **steps: faithful(explain_answer(lm, q, c, span, **steps, **common)),
                             lambda: faithful(occlude_answer(lm, q, c, span, **common)), "an answer",
                             lambda rec, first=True: print_record(rec.rec, first, rec.faith),
                             lambda **sampling: faithful(sample_span(lm, q, c, span, **sampling, side=side,
                                                                     **common)))


class Faithful:
    """One record and its faithfulness: ``to_dict`` is the record's JSON with ``"faithfulness"`` added."""

    def __init__(self, rec, faith):
        self.rec, self.faith = rec, faith

    def to_dict(self) -> dict:
        return self.rec.to_dict() | {"faithfulness": self.faith.to_dict()}


def print_record(rec, first: bool = True, faith=None) -> None:
    """One part: what is explained, F at the input and the baseline, the delta, the faithfulness (where given), the
    top words by |score|."""
    t = rec.target
    what = "no answer" if t.kind == "no-answer" else f"{t.kind} span {t.text!r} characters {t.start}-{t.end}"
    print(("" if first else "\n") + f"{what}, {t.part}: p(start)={t.p_start:.4f} p(end)={t.p_end:.4f}  "
          f"tokens {t.first}-{t.last}" + (f"  window {rec.window} of {rec.windows}" if rec.windows > 1 else ""))
    name = {"span": "log p(start) + log p(end)", "start": "log p(start)", "end": "log p(end)"}[t.part]
    print(f"  {rec.method}, F = {name}" + (" (exponent)" if rec.objective == "prob" else "") +
          f": F(x)={rec.f_x:.4f}  F(baseline)={rec.f_baseline:.4f}  baseline={rec.baseline}")
    if rec.delta is not None:
        steps = f"chosen for a relative delta <= {rec.tolerance:g}" if rec.tolerance is not None else "fixed"
        print(f"  sum of attributions {float(rec.scores.sum()):+.4f} (question {rec.side_total('question'):+.4f}, "
              f"context {rec.side_total('context'):+.4f})  convergence delta {rec.delta:+.2e} "
              f"({rec.relative_delta:.1%} of F(x)-F(baseline)); n_steps={rec.n_steps} ({steps})")
    if faith is not None:
        ks = f"{faith.ks[0]}-{faith.ks[-1]}%" if len(faith.ks) > 1 else f"{faith.ks[0]}%"
        print(f"  faithfulness (ERASER, the top {ks} of the words removed or kept, on the probability of "
              f"{faith.target}, p={faith.p_x:.4f}): comprehensiveness {faith.comprehensiveness:+.4f} (higher: more "
              f"faithful), sufficiency {faith.sufficiency:+.4f} (lower: more faithful); {faith.reading}")
    top = sorted(rec.words, key=lambda w: -abs(w.score))[:TOP_WORDS]
    width = max((len(w.word) for w in top), default=4)
    print(f"  top words (of {len(rec.words)}):")
    for w in top:
        print(f"    {w.side:<8}  {w.word:<{width}}  {w.start:>5}-{w.end:<5} {w.score:+.4f}")
