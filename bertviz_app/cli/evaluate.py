"""evaluate and layers: a model measured on a labelled file (metrics, slices, calibration, a second
model on the same rows) and its [CLS] geometry layer by layer."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from ..errors import InputError
from .analyses import add_engine_options, engine_from_args
from .answer_evaluate import add_answer_options, cmd_evaluate_answers, is_answerer, refuse_answer_file
from .common import fail, file_run, model_from_args, print_json
from .tagger_evaluate import cmd_evaluate_tagger, is_tagger, refuse_tagged_file


def cmd_evaluate(args) -> int:
    """evaluate FILE: metrics, slices worst first, calibration before/after a fitted temperature;
    --layers: a linear probe per layer; --compare-with M2: a second model on the same rows."""
    # lazily: `bertviz-app --help` imports none of the core
    from .. import base_of, evaluate_file, load_model, write_evaluation

    vectors = _vectors_folder(args) if args.out else None  # a folder that cannot be written fails now
    engine = engine_from_args(args)  # --engine ray without Ray installed fails now, saying how to install it
    if engine is not None and args.layers:
        raise SystemExit(fail("--layers computes its vectors in this process: leave out --engine ray or --layers"))
    lm = model_from_args(args)
    if is_answerer(lm):  # a question answering model: SQuAD's EM and F1 on a SQuAD-format file (answer_evaluate.py)
        return cmd_evaluate_answers(args, lm)
    refuse_answer_file(args, lm)  # a SQuAD file given to a classifier or a tagger: it needs a span reader, say so
    if is_tagger(lm):  # a token classifier: entity scores on a tagged file (tagger_evaluate.py)
        return cmd_evaluate_tagger(args, lm)
    refuse_tagged_file(args.data, lm)  # a CoNLL file given to a classifier: it needs a tagger, say so
    if args.save_temperature and lm.source == "hub":  # fails now, not after the predictions
        raise SystemExit(fail(f"--save-temperature: {lm.name} is a Hub model, with no folder of its own here; save it "
                               "to a folder (save_pretrained) and evaluate that folder"))
    other = load_model(args.compare_with, device=args.device, settings=args.settings) if args.compare_with else None
    base = base_of(lm)
    if base is not None and other is None:
        print(f"note: {lm.name} was fine-tuned from {base}; add --compare-with {base} to see what the fine-tune "
              "changed", file=sys.stderr if args.json else sys.stdout)
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            sys.stderr.write(f"\revaluated {done:,}/{total:,} rows")
            sys.stderr.flush()

    with file_run(tty):
        ev = evaluate_file(lm, args.data, args.text_column, args.label_column, args.pair_column,
                           batch_size=args.batch_size, words=tuple(args.word or ()), hold_out=args.hold_out,
                           seed=args.seed, progress=progress, cancel=threading.Event(), layers=args.layers,
                           compare_with=other, vectors_folder=vectors, engine=engine)
    if args.out:
        files = ["metrics.json", "predictions.csv", "reliability.json"]
        if ev.geometry is not None:
            files += ["layers.json", "projections.json and the PCA per layer", "vectors/"]
        files += ["comparison.json"] if ev.comparison is not None else []
        print(f"saved {write_evaluation(ev, args.out)} ({', '.join(files)})", file=sys.stderr)
    if args.json:
        print_json(ev.to_dict())
        return _save_temperature(args, lm, ev)
    _print_evaluation(ev)
    return _save_temperature(args, lm, ev)


def _vectors_folder(args) -> Path | None:
    """--out, checked before the predictions: with --layers, its vectors/ folder (created), else None."""
    out = Path(args.out).expanduser()
    if (out.exists() and not out.is_dir()) or not out.parent.is_dir():
        raise SystemExit(fail(f"--out {args.out}: give a folder (created if missing) inside an existing one"))
    if not args.layers:
        return None
    vectors = out / "vectors"  # the float16 vectors go to disk as they are computed (load_vectors reads them)
    try:
        vectors.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SystemExit(fail(f"cannot create {vectors}: {exc.strerror or exc}")) from None
    return vectors


def _print_evaluation(ev) -> None:
    """The evaluation as text: the rows read, accuracy and macro-F1, the worst slices, calibration, notes,
    and the probes and the comparison where there are any."""
    text, label, pair = ev.columns
    print(f"{ev.rows:,} rows of {ev.source} evaluated with {ev.model} (text {text!r}, label {label!r}"
          + (f", pair {pair!r}" if pair else "") + f"; labels matched by {ev.label_mapping})"
          + (f"; {len(ev.skipped):,} skipped" if ev.skipped else ""))
    lo, hi = ev.accuracy_interval
    f1 = "n/a (one class)" if ev.macro_f1 is None else f"{ev.macro_f1:.4f}"
    print(f"accuracy {ev.accuracy:.4f} (95% interval {lo:.3f}-{hi:.3f})  macro-F1 {f1}  "
          f"misclassified {int((ev.predicted != ev.true).sum()):,}")
    worst = ev.worst_slices(5)
    if worst:
        print("worst slices (accuracy, 95% Wilson interval, rows):")
        width = max(len(s.name) for s in worst)
        for s in worst:
            a, b = s.interval
            print(f"  {s.name:<{width}}  {s.accuracy:.3f}  [{a:.3f}, {b:.3f}]  n={s.size:,}")
    c = ev.calibration
    if c["temperature"] is None:
        print(f"calibration ({c['bins']} bins): ECE {c['ece']:.4f}, NLL {c['nll']:.4f}, Brier {c['brier']:.4f}. "
              f"{c['note']}")
    else:
        print(f"calibration ({c['bins']} bins, measured on {c['measured_on_rows']:,} rows): ECE {c['ece']:.4f} -> "
              f"{c['ece_after']:.4f}, NLL {c['nll']:.4f} -> {c['nll_after']:.4f}, Brier {c['brier']:.4f} -> "
              f"{c['brier_after']:.4f} with temperature {c['temperature']:.3f} (fitted on {c['fitted_on_rows']:,} "
              "other rows)")
        print(("worth keeping: " if c["helps"] else "not worth keeping: ") + c["judgement"]
              + ("" if c["helps"] else " (--save-temperature refuses it)"))
    for note in ev.notices:
        print(f"note: {note}")
    if ev.probes:
        _print_probes(ev.probes)
    if ev.comparison is not None:
        _print_comparison(ev.comparison)


def _save_temperature(args, lm, ev) -> int:
    """--save-temperature, after the results are printed: the fitted temperature into the model's folder;
    refused (status 2, the reason on stderr) when none was fitted or it did not help on the rows it was
    measured on (NLL lower, ECE not higher), the folder's calibration.json left as it was."""
    if not args.save_temperature:
        return 0
    from .. import save_evaluated_temperature  # lazily: `bertviz-app --help` imports none of the core

    c = ev.calibration
    try:
        saved = save_evaluated_temperature(lm.path, c, f"evaluate: {c.get('fitted_on_rows', 0):,} rows of {ev.source} "
                                                        f"(seed {args.seed})")
    except InputError as exc:
        return fail(f"--save-temperature: {exc}")
    lm.temperature = float(c["temperature"])  # this process's loaded model too
    print(f"saved temperature {c['temperature']:.3f} in {saved}: predict applies it from now on "
          "(--raw-probabilities shows the model's own softmax)", file=sys.stderr)
    return 0


def _print_probes(probes: list[dict]) -> None:
    print(f"[CLS] geometry: linear probe accuracy per layer, {probes[0]['folds']}-fold cross-validated on the true "
          "classes (layer 0 = embeddings)")
    print("layer  [CLS] probe  mean probe")
    for p in probes:
        print(f"{p['layer']:>5}  {p['cls_probe_accuracy']:>11.3f}  {p['mean_probe_accuracy']:>10.3f}")


def _print_comparison(c) -> None:
    a, b = c.models
    f1 = ["n/a" if f is None else f"{f:.4f}" for f in c.macro_f1]
    print(f"A = {a}, B = {b} on the same {c.rows:,} rows: accuracy {c.accuracy[0]:.4f} vs {c.accuracy[1]:.4f}, "
          f"macro-F1 {f1[0]} vs {f1[1]}")
    print(f"both right {c.both_correct:,}, only A right {c.only_a_correct:,}, only B right {c.only_b_correct:,}, "
          f"both wrong {c.both_wrong:,}; the predictions differ on {c.disagreements:,} rows")
    print(f"McNemar's exact test: {c.reading}")
    largest = c.slices[:5]
    if largest:
        print("largest slice differences (accuracy A, B, B - A, rows):")
        width = max(len(s["name"]) for s in largest)
        for s in largest:
            print(f"  {s['name']:<{width}}  {s['accuracy_a']:.3f}  {s['accuracy_b']:.3f}  {s['difference']:+.3f}  "
                  f"n={s['size']:,}")


def cmd_layers(args) -> int:
    """[CLS] geometry by layer: a linear probe's cross-validated accuracy at every depth, on the [CLS]
    vector and on the mean of the word tokens' vectors, for a labelled file."""
    # lazily: `bertviz-app --help` imports none of the core
    from .. import layer_vectors, probe_layers, read_labelled, read_table, save_projections

    out_dir = None
    if args.out:
        out_dir = Path(args.out).expanduser()
        if out_dir.exists() and not out_dir.is_dir():
            raise SystemExit(fail(f"--out {out_dir} is a file; give a folder (it is created if missing)"))
        if not out_dir.parent.is_dir():
            raise SystemExit(fail(f"--out {out_dir}: the folder {out_dir.parent} does not exist"))
    table = read_table(args.data, max_upload_mb=args.settings.max_upload_mb,
                       max_rows=args.settings.max_rows)  # a bad file fails before the model loads
    lm = model_from_args(args)
    data = read_labelled(table, lm, args.text_column, args.label_column, settings=args.settings)
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    counts = ", ".join(f"{k} {v:,}" for k, v in data.class_counts().items())
    say(f"{args.data}: text column {data.columns[0]!r}, label column {data.columns[1]!r}; {len(data.texts):,} rows "
        f"({counts}); model {lm.name}, {lm.num_layers} layers")
    for line in data.notices:
        say(f"note: {line}")
    for line in data.warnings:
        say(f"warning: {line}")
    if out_dir is not None:
        try:
            (out_dir / "vectors").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SystemExit(fail(f"cannot create {out_dir / 'vectors'}: {exc.strerror or exc}")) from None

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\rvectors of {done:,}/{total:,} rows")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    vectors = layer_vectors(lm, data.texts, progress=progress,
                            folder=out_dir / "vectors" if out_dir is not None else None)
    probes = probe_layers(vectors, data.labels, seed=args.seed)
    majority = max(data.class_counts().values()) / len(data.texts)
    result = {"rows": len(data.texts), "model": lm.name, "classes": data.class_counts(), "majority": majority,
              "folds": probes[0]["folds"], "layers": probes}
    if out_dir is not None:
        (out_dir / "layers.json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
        index = save_projections(out_dir, vectors)
        say(f"saved {out_dir / 'layers.json'}, {index} (PCA per layer) and the float16 vectors in "
            f"{out_dir / 'vectors'}")
    if args.json:
        print_json(result)
        return 0
    print(f"linear probe accuracy, {result['folds']}-fold cross-validated (majority class: {majority:.3f}); "
          "layer 0 = embeddings")
    print("layer  [CLS] probe       mean probe")
    for p in probes:
        print(f"{p['layer']:>5}  {p['cls_probe_accuracy']:.3f} +- {p['cls_std']:.3f}  "
              f"{p['mean_probe_accuracy']:.3f} +- {p['mean_std']:.3f}")
    best = max(probes, key=lambda p: (p["cls_probe_accuracy"], -p["layer"]))
    print(f"[CLS] separates the classes best at layer {best['layer']} ({best['cls_probe_accuracy']:.3f})")
    return 0


def register(add: Callable) -> None:
    """The arguments of evaluate and layers (``add`` gives each the common ones)."""
    p = add("evaluate", cmd_evaluate, "evaluate a model on a labelled CSV/TSV/TXT file: metrics, slices worst first, "
                                      "calibration; a tagger on a tagged file: entity F1 per type, slices, errors; "
                                      "a question answering model on a SQuAD file: exact match and F1, slices, errors")
    p.add_argument("data", help="file with a header row, a text column and a label column (.csv, .tsv, .txt); for a "
                                "tagger (token classification), a CoNLL file, JSON lines or a tokens/tags CSV; for a "
                                "question answering model, SQuAD JSON or a question/context/answer_text/answer_start "
                                "CSV")
    p.add_argument("--text-column", default=None, help="column with the text (default: guessed)")
    p.add_argument("--label-column", default=None, help="column with the true label (default: guessed)")
    p.add_argument("--pair-column", default=None, help="column with a second text, for sentence pairs")
    p.add_argument("--word", action="append", default=None, metavar="W",
                   help="also slice the rows (a tagger: the sentences) containing W (case-insensitive, whole word); "
                        "repeat for more words")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="also write a run folder: metrics.json, predictions.csv (every row as given, then the "
                        "prediction and probabilities), reliability.json; with --layers layers.json, the PCA per "
                        "layer (projections.json) and the float16 vectors (vectors/); with --compare-with "
                        "comparison.json")
    p.add_argument("--layers", action="store_true",
                   help="also probe every layer: a linear probe's cross-validated accuracy on the [CLS] vector and on "
                        "the mean of the word tokens' vectors (the same forward pass as the predictions)")
    p.add_argument("--compare-with", default=None, metavar="M2",
                   help="also evaluate a second model (a registered name or a folder, as --model) on the same rows "
                        "and compare: counts, McNemar's exact test, slice differences, disagreeing rows; two taggers: "
                        "the entity F1 difference with a paired bootstrap interval; two readers: B - A in exact match "
                        "and F1 with paired bootstrap intervals")
    p.add_argument("--save-temperature", action="store_true",
                   help="save the temperature fitted here into the model's folder (calibration.json), which predict "
                        "then applies; refused, with the reason, unless it helped on the rows it was measured on "
                        "(NLL lower, ECE not higher)")
    p.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default: %(default)s)")
    p.add_argument("--hold-out", type=float, default=0.5,
                   help="share of the rows the temperature is fitted on; the others measure it (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of that split (a tagger: of the bootstrap intervals) (default: %(default)s)")
    add_answer_options(p)
    add_engine_options(p)
    p = add("layers", cmd_layers,
            "[CLS] geometry by layer: how well a linear probe separates a labelled file's classes at every layer")
    p.add_argument("data", help="labelled file with a header row (.csv, .tsv, .txt)")
    p.add_argument("--text-column", default=None, help="column with the text (default: guessed)")
    p.add_argument("--label-column", default=None, help="column with the label, the model's label names "
                                                          "(default: guessed)")
    p.add_argument("--seed", type=int, default=0, help="seed of the cross-validation folds (default: %(default)s)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="also write DIR/layers.json, the PCA coordinates of every layer (3-D .npy files, the 2-D "
                        "projection in their first two columns; index projections.json) and the float16 vectors")
