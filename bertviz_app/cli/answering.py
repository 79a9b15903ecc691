"""answer: a question answering model's answer to a question, a span of the context (its characters, its score),
with the n-best spans and the no-answer score."""

from __future__ import annotations

from collections.abc import Callable

from .common import model_from_args, print_json


def cmd_answer(args) -> int:
    """answer --question Q --context C: one JSON object (--json), else the answer, the no-answer score and the
    n-best spans, one per line."""
    from .. import answer  # lazily: `bertviz-app --help` imports none of the core

    lm = model_from_args(args)
    threshold = None if args.never_no_answer else args.no_answer_threshold
    [a] = answer(lm, args.question, args.context, n_best=args.n_best, max_answer_len=args.max_answer_len,
                 no_answer_threshold=threshold, stride=args.stride)
    if args.json:
        print_json(a.to_dict())
        return 0
    print(f"{a.score:.3f}  {a.start:>5}-{a.end:<5}  " + ("(no answer)" if a.no_answer else a.text))
    print(f"no answer: {a.no_answer_score:.3f}" + (f" (read in {a.windows} windows)" if a.windows > 1 else ""))
    for i, s in enumerate(a.n_best, start=1):
        print(f"{i:>2}. {s.score:.3f}  {s.start:>5}-{s.end:<5}  {s.text}")
    return 0


def register(add: Callable) -> None:
    """The arguments of answer (``add`` gives it the common ones)."""
    p = add("answer", cmd_answer,
            "a question's answer, a span of a context, from a question answering (...ForQuestionAnswering) model")
    p.add_argument("--question", required=True, help="the question")
    p.add_argument("--context", required=True, help="the text the answer is found in")
    p.add_argument("--n-best", type=int, default=5, help="best spans listed (default %(default)s)")
    p.add_argument("--max-answer-len", type=int, default=30, help="longest answer, in tokens (default %(default)s)")
    p.add_argument("--no-answer-threshold", type=float, default=0.0,
                   help="answer 'no answer' when its score beats the best span's by more than this (SQuAD 2.0's "
                        "null threshold; default %(default)s)")
    p.add_argument("--never-no-answer", action="store_true", help="always answer the best span")
    p.add_argument("--stride", type=int, default=None,
                   help="context tokens shared by neighbouring windows of a long context (default: 128, or half the "
                        "window where that is less)")
