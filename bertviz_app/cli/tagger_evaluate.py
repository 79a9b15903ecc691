"""evaluate FILE with a tagger: a token classification model scored on a tagged file (CoNLL, JSON lines, a
tokens/tags CSV): entity F1 with its interval, per type, slices, the sentences it gets wrong, and with
--compare-with a second tagger on the same sentences."""

from __future__ import annotations

import sys
import threading

from .common import fail, file_run, print_json

ERRORS_PRINTED = 5  # sentences with a wrong tag printed without --json (the JSON lists up to 200)
# evaluate's options that only a classifier's evaluation reads: (attribute, option, what it is for)
_CLASSIFIER_ONLY = (("text_column", "--text-column", "names a table's text column"),
                    ("label_column", "--label-column", "names a table's label column"),
                    ("pair_column", "--pair-column", "names a table's second text column"),
                    ("layers", "--layers", "probes a classifier's [CLS] vectors"),
                    ("save_temperature", "--save-temperature", "calibrates a classifier's probabilities"),
                    ("out", "--out", "writes a classifier's run folder (use --json and redirect it)"))


def is_tagger(lm) -> bool:
    """Is the loaded model a token classifier (evaluate then scores entities)?"""
    from ..models.heads import TOKEN_CLASSIFICATION  # lazily: `bertviz-app --help` imports none of the core

    return lm.head is TOKEN_CLASSIFICATION


def refuse_tagged_file(data: str, lm) -> None:
    """A classifier given a tagged file (CoNLL, or JSON lines with tokens): InputError naming the model's head and
    the token classification head that file needs (the table reader would only say it is no table)."""
    from pathlib import Path

    from ..models.heads import TOKEN_CLASSIFICATION  # lazily, as above
    from ..train.data.tagged import looks_like_conll

    try:
        with Path(data).expanduser().open("rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return  # the reader says what is wrong with the path
    start = head.lstrip()[:200]
    if looks_like_conll(head) or (start.startswith("{") and '"tokens"' in start):
        lm.require_head(TOKEN_CLASSIFICATION, f"{Path(data).name} holds tagged sentences (a token and its tag each), "
                                              "and evaluating them scores the entities a tagger finds")


def cmd_evaluate_tagger(args, lm) -> int:
    """evaluate FILE --model TAGGER [--word W ...] [--compare-with TAGGER2] [--json]: what ``cmd_evaluate`` runs
    when the model is a token classifier."""
    from ..evaluate.tagger_evaluation import compare_taggers, evaluate_tagged  # lazily, as above
    from ..models.registry import load_model

    if getattr(args, "engine", "local") == "ray":
        return fail("the Ray engine evaluates classifiers; taggers run in one process: leave out --engine ray")
    for attr, option, what in _CLASSIFIER_ONLY:
        if getattr(args, attr, None):
            return fail(f"{option} {what}; {lm.name} is a tagger (token classification): leave out {option}")
    other = load_model(args.compare_with, device=args.device, settings=args.settings) if args.compare_with else None
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            sys.stderr.write(f"\revaluated {done:,}/{total:,} sentences")
            sys.stderr.flush()

    run = dict(words=tuple(args.word or ()), batch_size=args.batch_size, seed=args.seed, progress=progress,
               cancel=threading.Event())
    with file_run(tty):
        if other is None:
            ev, comparison = evaluate_tagged(lm, args.data, **run), None
        else:
            comparison = compare_taggers(lm, other, args.data, **run)
            ev = comparison.a
    if args.json:
        print_json({**ev.to_dict(), **({"comparison": comparison.to_dict()} if comparison is not None else {})})
        return 0
    print_tagger_evaluation(ev)
    if comparison is not None:
        print_tagger_comparison(comparison)
    return 0


def _interval(iv) -> str:
    return "n/a" if iv is None else f"[{iv[0]:.3f}, {iv[1]:.3f}]"


def print_tagger_evaluation(ev) -> None:
    """The evaluation as text: what was read, entity scores with intervals, per type, slices, wrong sentences."""
    r = ev.report
    iv = r["interval"] or {}
    print(f"{ev.n_sentences:,} sentences of {ev.source} ({ev.format}) evaluated with {ev.model}: entities matched "
          f"strictly ({ev.scheme}; type, start and end), 95% intervals by a bootstrap over sentences")
    print(f"entity F1 {r['entity_f1']:.4f} {_interval(iv.get('f1'))}  precision {r['precision']:.4f} "
          f"{_interval(iv.get('precision'))}  recall {r['recall']:.4f} {_interval(iv.get('recall'))}  "
          f"entities {r['support']:,} true, {r['predicted']:,} found")
    print(f"words tagged right {r['token_accuracy']:.1%} (tagging every word O: {r['baseline']['token_accuracy']:.1%})")
    print(r["verdict"])
    if r["per_type"]:
        width = max(4, *(len(t) for t in r["per_type"]))
        print(f"{'type':<{width}}  precision  recall      f1  F1 95% interval   support")
        for t, s in r["per_type"].items():
            f1_iv = None if s["interval"] is None else s["interval"]["f1"]
            print(f"{t:<{width}}  {s['precision']:>9.3f}  {s['recall']:>6.3f}  {s['f1']:>6.3f}  "
                  f"{_interval(f1_iv):<16}  {s['support']:>7,}")
    slices = [s for s in ev.slices if s.kind != "type"]
    if slices:
        print("slices (entity F1, 95% interval, sentences, true entities):")
        width = max(len(s.name) for s in slices)
        for s in slices:
            f1 = "  n/a" if s.f1 is None else f"{s.f1:.3f}"
            print(f"  {s.name:<{width}}  {f1}  {_interval(s.interval):<16}  n={s.n_sentences:,}  "
                  f"entities={s.support:,}")
    wrong = ev.errors(None)
    print(f"sentences with a wrong tag: {len(wrong):,} of {ev.n_sentences:,}"
          + (f" (the first {ERRORS_PRINTED}; --json lists up to 200)" if len(wrong) > ERRORS_PRINTED else ""))
    for e in wrong[:ERRORS_PRINTED]:
        words = [f"{w}[{t}->{p}]" if i in e["wrong"] else w
                 for i, (w, t, p) in enumerate(zip(e["tokens"], e["tags"], e["predicted"]))]
        print(f"  {ev.unit} {e['where']}: {' '.join(words)}")
    for note in ev.notices:
        print(f"note: {note}")


def print_tagger_comparison(c) -> None:
    """Two taggers on the same sentences: both entity F1s, the difference with its paired interval, per type."""
    a, b = c.a, c.b
    print(f"A = {a.model}, B = {b.model} on the same {a.n_sentences:,} sentences: entity F1 {a.entity_f1:.4f} vs "
          f"{b.entity_f1:.4f}")
    s = c.sentences
    print(f"sentences wholly right: both {s['both_right']:,}, only A {s['only_a_right']:,}, only B "
          f"{s['only_b_right']:,}, neither {s['both_wrong']:,}; the entities found differ in {s['disagree']:,}")
    print(c.reading)
    if c.per_type:
        width = max(4, *(len(t) for t in c.per_type))
        print(f"{'type':<{width}}  F1 A    F1 B    B - A   95% interval        support")
        for t, d in c.per_type.items():
            lo, hi = d["interval"]
            print(f"{t:<{width}}  {d['f1_a']:.3f}  {d['f1_b']:.3f}  {d['difference']:+.3f}  "
                  f"[{lo:+.3f}, {hi:+.3f}]  {d['support']:>7,}")
