"""predict, explain, explain-csv and predict-csv: what the model says about a text, and why (one text, a
document read in windows, several methods side by side, or every row of a file, in this process or on
Ray: ``--engine ray``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..results import DEFAULT_TOLERANCE, FIXED_N_STEPS, NO_COMPLETENESS
from .answer_explain import cmd_explain_answer, explains_answer
from .answer_explain import register_options as register_answer_options
from .common import fail, ig_steps, model_from_args, one_text, print_json, read_texts
from .entity_explain import cmd_explain_entity, explains_entities, register_options


def cmd_predict(args) -> int:
    from .. import pair_notice, predict  # lazily: `bertviz-app --help` imports none of the core

    lm = model_from_args(args)
    texts = read_texts(args)
    pairs = [args.pair] * len(texts) if args.pair else None
    if note := pair_notice(lm, args.pair):  # on stderr: --json keeps one JSON object per line on stdout
        sys.stderr.write(f"note: {note}\n")
    window = dict(window=True, stride=args.stride, pool=args.pool) if args.window else {}
    for p in predict(lm, texts, pairs, calibrated=not args.raw_probabilities, **window):
        if args.json:
            print_json(p.to_dict())
        else:
            scores = "  ".join(f"{k} {v:.3f}" for k, v in p.scores.items())
            trunc = "  (truncated)" if p.truncated else ""
            print(f"{p.label:<12} {scores}  | {p.text[:80]}{trunc}")
    return 0


def _compare(args, lm, text) -> int:
    from .. import compare_methods  # lazily: `bertviz-app --help` imports none of the core

    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip()) if args.methods else None
    kw = {} if methods is None else {"methods": methods}
    n_steps, tolerance = ig_steps(args)
    c = compare_methods(lm, text, target=args.target, baseline=args.baseline, pair=args.pair, n_steps=n_steps,
                        tolerance=tolerance, n_samples=args.n_samples, seed=args.seed, **kw)
    if args.json:
        print_json(c.to_dict())
        return 0
    width = max(len(m) for m in c.methods)
    print(f"target {c.attributions[0].target}: p={c.faithfulness[0].p_x:.4f}  baseline={args.baseline}")
    print(f"{'method':<{width}}  seconds  forward  backward  comprehensiveness  sufficiency  rollout rho")
    for m, a, f, r in zip(c.methods, c.attributions, c.faithfulness, c.rollout_spearman):
        print(f"{m:<{width}}  {a.seconds:7.3f}  {a.n_forward:7d}  {a.n_backward:8d}  {f.comprehensiveness:+17.4f}  "
              f"{f.sufficiency:+11.4f}  {r:+11.2f}")
    print(c.reading)
    tw = max(len(t) for t in c.tokens)
    print(f"{'token':<{tw}}  " + "  ".join(f"{m[:10]:>10}" for m in c.methods))
    for i, tok in enumerate(c.tokens):
        print(f"{tok:<{tw}}  " + "  ".join(f"{a.scores[i]:+10.4f}" for a in c.attributions))
    print("Spearman between methods (|scores|, non-special tokens):")
    for m, row in zip(c.methods, c.spearman):
        print(f"  {m:<{width}}  " + "  ".join(f"{v:+5.2f}" for v in row))
    return 0


def cmd_explain(args) -> int:
    """explain TEXT: one method's attribution of each token (--compare: several; --window: a long document)."""
    # lazily: `bertviz-app --help` imports none of the core; `explain` from its module, as the facade's name
    # is the subpackage bertviz_app.interpret once that is imported
    from .. import attribute, check_output_path, faithfulness
    from ..interpret.methods import canonical_method, explain

    for path in (args.html, args.out, args.svg, args.png):  # a bad path fails now, not after the attribution
        if path:
            check_output_path(path)
    # "ig", "value-zeroing"...: the registered names; an unknown one fails now, listing the valid ones
    method = args.method = canonical_method(args.method)
    for m in (args.methods or "").split(",") if args.compare else ():
        if m.strip():
            canonical_method(m)
    if explains_answer(args):  # --question/--context: why a question answering model answers a span (no text)
        return cmd_explain_answer(args)
    lm = model_from_args(args)
    text = one_text(args)
    if explains_entities(args, lm):  # a tagger, or --entity/--token: why an entity or a word-piece is tagged so
        return cmd_explain_entity(args, lm, text)
    if args.compare:
        if args.window:
            raise SystemExit(fail("--window explains one method over a whole document; --compare takes a text "
                                   "that fits the model"))
        return _compare(args, lm, text)
    if args.window:
        return _explain_windows(args, lm, text)
    if method != "integrated_gradients":
        if args.tolerance is not None:
            raise SystemExit(fail("--tolerance is for integrated_gradients only"))
        a = explain(lm, text, method, target=args.target, baseline=args.baseline, pair=args.pair,
                    output=args.output, n_steps=args.n_steps, n_samples=args.n_samples, seed=args.seed)
    else:
        n_steps, tolerance = ig_steps(args)
        a = attribute(lm, text, target=args.target, baseline=args.baseline, n_steps=n_steps, pair=args.pair,
                      output=args.output, tolerance=tolerance)
    faith = faithfulness(lm, a)  # ERASER, one batched forward pass: shown with every explanation
    _save_explanation(args, lm, text, a, faith)
    if args.json:
        print_json(a.to_dict() | {"faithfulness": faith.to_dict()})
        return 0
    _print_explanation(a, faith)
    return 0


def _save_explanation(args, lm, text, a, faith) -> None:
    """The baseline's note, then --html/--out (as the web app's downloads) and --svg/--png (the coloured words)."""
    # lazily: `bertviz-app --help` imports none of the core
    from .. import baseline_jumps, predict, recommended_baseline, write_html, write_json, write_png, write_svg

    if a.method == "integrated_gradients" and baseline_jumps(lm, a.baseline):
        print(f"note: this model's first layer sees LayerNorm(word vector) alone and the {a.baseline} baseline's word "
              "vectors are zero, so the path from it jumps at its first point; --baseline "
              f"{recommended_baseline(lm)} gives a smooth path.", file=sys.stderr)
    if args.html or args.out:  # the same files as the web app's download buttons
        pred = predict(lm, [text], [args.pair] if args.pair else None)[0]
        for path, write in ((args.html, write_html), (args.out, write_json)):
            if path:
                saved = write(path, a, pred, model=lm.name, faith=faith)
                print(f"saved {saved}", file=sys.stderr)
    for path, write in ((args.svg, write_svg), (args.png, write_png)):  # the coloured words as a figure
        if path:
            print(f"saved {write(path, a, merge=not args.tokens, min_change=lm.settings.min_change)}", file=sys.stderr)


def _print_explanation(a, faith) -> None:
    """The attribution as text: its numbers, its faithfulness, any warning, and a bar per token."""
    from .. import change_warning, colour_scale  # lazily: `bertviz-app --help` imports none of the core

    scale = colour_scale(a)
    if a.method != "integrated_gradients":
        print(f"{a.method}, target {a.target}: f(x)={a.f_x:.4f}  f(baseline)={a.f_baseline:.4f}  "
              f"baseline={a.baseline}  "
              f"cost: {a.n_forward} forward, {a.n_backward} backward rows, {a.seconds:.3f} s")
        if not a.has_completeness:
            print(f"completeness {NO_COMPLETENESS}")
    else:
        steps = f"chosen for a relative delta <= {a.tolerance:g}" if a.tolerance is not None else "fixed"
        print(f"target {a.target}: f(x)={a.f_x:.4f}  f(baseline)={a.f_baseline:.4f}  baseline={a.baseline}  "
              f"n_steps={a.n_steps} ({steps})")
        print(f"sum of attributions {float(a.scores.sum()):+.4f}  convergence delta {a.delta:+.2e} "
              f"({a.relative_delta:.1%} of f(x)-f(baseline))")
    print(f"faithfulness (ERASER AOPC, top {', '.join(str(k) for k in faith.ks)}%): comprehensiveness "
          f"{faith.comprehensiveness:+.4f} (higher = more faithful), "
          f"sufficiency {faith.sufficiency:+.4f} (lower = more "
          f"faithful): {faith.reading}")
    warning = change_warning(a, scale)
    if warning:
        print(f"warning: {warning}")
    print(f"bars: 20 marks = {scale.full:.4g}"
          + (" (the whole change)" if scale.absolute and not scale.too_small else ""))
    for tok, s in zip(a.tokens, a.scores):
        bar = ("+" if s >= 0 else "-") * int(round(scale.alpha(s) * 20))
        print(f"  {tok:<16} {s:+.4f} {bar}")


def _explain_windows(args, lm, text) -> int:
    """explain --window: one attribution per token of the whole document, read in predict's windows."""
    # lazily: `bertviz-app --help` imports none of the core
    from .. import change_warning, colour_scale, explain_windows, write_html, write_json

    if args.method != "integrated_gradients" and args.tolerance is not None:
        raise SystemExit(fail("--tolerance is for integrated_gradients only"))
    n_steps, tolerance = ig_steps(args) if args.method == "integrated_gradients" else (args.n_steps, None)
    d = explain_windows(lm, text, args.method, target=args.target, baseline=args.baseline, pair=args.pair,
                        output=args.output, stride=args.stride, n_steps=n_steps, tolerance=tolerance,
                        n_samples=args.n_samples, seed=args.seed)
    a = d.attribution
    for path, write in ((args.html, write_html), (args.out, write_json)):
        if path:
            saved = write(path, a, d.prediction, model=lm.name, windows=d.window_dicts())
            print(f"saved {saved}", file=sys.stderr)
    if args.json:
        print_json(d.to_dict())
        return 0
    p = d.prediction
    print(f"{len(d.windows)} windows of at most {lm.max_length} tokens ({d.stride} shared by neighbours), "
          f"{len(a.tokens)} tokens; document: {p.label} "
          + "  ".join(f"{k} {v:.3f}" for k, v in p.scores.items()) + f"; explaining {a.target} with {a.method}")
    for w in d.windows:
        wa = w.attribution
        print(f"  window {w.index}: tokens {w.token_span[0]}-{w.token_span[1] - 1}  {w.label:<12} "
              + "  ".join(f"{k} {v:.3f}" for k, v in zip(w.labels, w.probs))
              + f"  f(x)-f(baseline) {wa.f_x - wa.f_baseline:+.4f}  scores sum {float(wa.scores.sum()):+.4f}")
    print(f"merged scores sum {d.scores_sum:+.4f} (each window's scores add up to its own change; the merged sum is "
          f"not the change of one input); worst window's relative delta {a.relative_delta:.1%}")
    scale = colour_scale(a)
    warning = change_warning(a, scale)
    if warning:
        print(f"warning: {warning}")
    print(f"bars: 20 marks = {scale.full:.4g}")
    for tok, s in zip(a.tokens, a.scores):
        bar = ("+" if s >= 0 else "-") * int(round(scale.alpha(s) * 20))
        print(f"  {tok:<16} {s:+.4f} {bar}")
    return 0


def add_engine_options(p) -> None:
    """--engine, --address, --workers, --cpus-per-worker, --gpus-per-worker: where a batch command runs."""
    p.add_argument("--engine", default="local", choices=["local", "ray"],
                   help="local: this process (default); ray: a pool of Ray actors, each loading the model once "
                        "(needs pip install \".[ray]\"; see docs/scale.md)")
    p.add_argument("--address", default=None, metavar="auto|ray://HOST:PORT",
                   help="with --engine ray: the cluster to run on (auto: the one this machine joined with ray start; "
                        "default: a Ray started in this process)")
    p.add_argument("--workers", type=int, default=None,
                   help="with --engine ray: actors in the pool (default: as many as the cluster's CPUs hold)")
    p.add_argument("--cpus-per-worker", type=float, default=1.0,
                   help="with --engine ray: CPUs each actor holds, and its torch threads (default: %(default)s)")
    p.add_argument("--gpus-per-worker", type=float, default=0.0,
                   help="with --engine ray: GPUs each actor holds; above 0 the model runs on the actor's GPU "
                        "(default: %(default)s)")


def engine_from_args(args):
    """The engine of the engine options (None: this process), checked before the model loads: Ray
    not installed says how to install it."""
    from ..service.ray_engine import make_engine  # lazily: ray itself only inside, when asked for

    return make_engine(args.engine, address=args.address, workers=args.workers,
                       cpus_per_worker=args.cpus_per_worker, gpus_per_worker=args.gpus_per_worker)


def cmd_explain_csv(args) -> int:
    from .. import explain_csv, load_model  # lazily: `bertviz-app --help` imports none of the core
    from ..interpret.batch_explain import process_device  # lazily: as the line above

    engine = engine_from_args(args)
    # under accelerate launch/torchrun each process takes its own GPU (or the CPU) and its share of rows
    world_size, local_rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("LOCAL_RANK", "0"))
    if engine is not None and world_size > 1:
        raise SystemExit(fail("--engine ray spreads the rows itself: run it without accelerate launch/torchrun"))
    lm = load_model(args.model, device=args.device or process_device(world_size, local_rank), settings=args.settings)

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\rexplained {done}/{total} rows")
        sys.stderr.flush()

    n_steps, tolerance = ig_steps(args)
    res = explain_csv(lm, args.data, args.out, text_column=args.text_column, pair_column=args.pair_column,
                      target=args.target, baseline=args.baseline, tolerance=tolerance, n_steps=n_steps,
                      progress=progress, methods=args.methods, raw=args.raw, world_size=world_size,
                      local_rank=local_rank, engine=engine)
    sys.stderr.write("\n")
    if res.path is None:  # a non-main process under accelerate launch: the main one reports
        return 0
    if args.json:
        print_json(res.to_dict())
        return 0
    print(f"wrote {res.path}: {res.explained} rows explained in {res.seconds:.1f} s ({res.texts_per_s:.2f} texts/s, "
          + (f"on {engine.describe()})" if engine is not None else
             f"{res.processes} process{'es' if res.processes > 1 else ''})")
          + (f", mean relative delta {res.mean_relative_delta:.3f}" if res.mean_relative_delta is not None else ""))
    for m, st in res.method_stats.items():
        if not st["explained"]:
            print(f"  {m}: refused on every row ({st['refused']})")
            continue
        print(f"  {m}: {st['seconds_per_text']:.3f} s per text (+{st['faithfulness_seconds_per_text']:.3f} s "
              f"faithfulness), comprehensiveness {st['mean_comprehensiveness']:+.3f}, sufficiency "
              f"{st['mean_sufficiency']:+.3f}" + (f", refused on {st['refused']} rows" if st["refused"] else ""))
    for note in res.notes:  # what the reader did, which cells the spreadsheet guard changed
        print(f"  note: {note}")
    for row, why in res.skipped[:10]:
        print(f"  row {row} skipped: {why}")
    if len(res.skipped) > 10:
        print(f"  ... and {len(res.skipped) - 10} more skipped rows (listed in the output file)")
    for cls, words in res.top_words.items():  # by the first method
        shown = ", ".join(f"{w} {m:+.3f} ({n})" for w, m, n in words) or "(no word occurs twice)"
        print(f"towards {cls}{f' ({res.methods[0]})' if len(res.methods) > 1 else ''}: {shown}")
    return 0


def cmd_predict_csv(args) -> int:
    """predict-csv FILE --out PATH: every row's prediction, in this process or on Ray."""
    from ..interpret.batch_explain import predict_csv  # lazily: `bertviz-app --help` imports none of the core

    engine = engine_from_args(args)
    lm = model_from_args(args)

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\rpredicted {done}/{total} rows")
        sys.stderr.flush()

    res = predict_csv(lm, args.data, args.out, text_column=args.text_column, pair_column=args.pair_column,
                      calibrated=not args.raw_probabilities, raw=args.raw, progress=progress, engine=engine)
    sys.stderr.write("\n")
    if args.json:
        print_json(res.to_dict())
        return 0
    print(f"wrote {res.path}: {res.predicted} rows predicted in {res.seconds:.1f} s ({res.texts_per_s:.1f} texts/s"
          + (f", on {engine.describe()})" if engine is not None else ")"))
    for note in res.notes:
        print(f"  note: {note}")
    for row, why in res.skipped[:10]:
        print(f"  row {row} skipped: {why}")
    if len(res.skipped) > 10:
        print(f"  ... and {len(res.skipped) - 10} more skipped rows (listed in the output file)")
    return 0


def register(add: Callable) -> None:
    """The arguments of predict, explain, explain-csv and predict-csv (``add`` gives each the common ones)."""
    register_predict(add)
    register_explain(add)
    register_explain_csv(add)
    register_predict_csv(add)


def register_predict(add: Callable) -> None:
    p = add("predict", cmd_predict, "class probabilities for each text", "many")
    p.add_argument("--window", action="store_true",
                   help="read a text longer than the model's limit whole, in overlapping windows whose logits "
                        "are pooled")
    p.add_argument("--stride", type=int, default=128,
                   help="with --window: tokens shared by neighbouring windows (default: %(default)s)")
    p.add_argument("--pool", default="mean", choices=["mean", "max"],
                   help="with --window: how window logits are combined")
    p.add_argument("--raw-probabilities", action="store_true",
                   help="the model's own softmax, without the temperature of the folder's calibration.json")


def register_explain(add: Callable) -> None:
    p = add("explain", cmd_explain, "attribution of each token (Integrated Gradients or --method)", "one")
    p.add_argument("--method", default="integrated_gradients",
                   help="integrated_gradients (default; or ig), gradient_x_input, saliency, occlusion, kernel_shap, "
                        "lime, or a context-mixing measure's [CLS] row: raw, norm, value_zeroing, alti")
    p.add_argument("--compare", action="store_true",
                   help="run several methods side by side: scores, cost, agreement and ERASER faithfulness")
    p.add_argument("--methods", default=None, metavar="M[,M...]",
                   help="with --compare: comma-separated methods (default: the six attribution methods); the "
                        "context-mixing measures raw, norm, value_zeroing, alti are compared when named, e.g. "
                        "ig,value_zeroing,alti,norm,raw")
    p.add_argument("--n-samples", type=int, default=None,
                   help="kernel_shap, lime: perturbed inputs (default: 8 per word, 64-400)")
    p.add_argument("--seed", type=int, default=0, help="kernel_shap, lime: random seed (default: %(default)s)")
    p.add_argument("--target", default=None, help="class to explain (default: the predicted one)")
    p.add_argument("--baseline", default="pad", choices=["pad", "mask", "unk", "zero"])
    p.add_argument("--n-steps", "--steps", type=int, default=None,
                   help=f"exactly this many integration steps (e.g. {FIXED_N_STEPS}, Captum's default) instead of "
                        "choosing them (default: chosen, see --tolerance)")
    p.add_argument("--output", default="prob", choices=["prob", "logit"], help="attribute the probability or the logit")
    p.add_argument("--tolerance", type=float, default=None,
                   help="guarantee this relative convergence delta with as few steps as it takes (default: "
                        f"{DEFAULT_TOLERANCE}, unless --n-steps is given; --n-steps is ignored when this is); "
                        f"0: exactly --n-steps (default {FIXED_N_STEPS})")
    p.add_argument("--html", default=None, metavar="PATH",
                   help="also save the explanation as a standalone HTML page (coloured tokens and every number; "
                        "opens offline)")
    p.add_argument("--out", default=None, metavar="PATH",
                   help="also save the explanation as JSON (the attribution, the prediction and the model)")
    p.add_argument("--svg", default=None, metavar="PATH",
                   help="also save the coloured words as a vector SVG figure (text stays text), as the page's "
                        "'Download as SVG'")
    p.add_argument("--png", default=None, metavar="PATH", help="also save the coloured words as a PNG figure")
    p.add_argument("--tokens", action="store_true",
                   help="with --svg/--png: colour the model's tokens instead of whole words")
    p.add_argument("--window", action="store_true",
                   help="explain a text longer than the model's limit whole: each of predict's overlapping windows "
                        "explained, the scores merged (one per token of the document; each window's prediction listed)")
    p.add_argument("--stride", type=int, default=None,
                   help="with --window: tokens shared by neighbouring windows (default: 128, at most half the "
                        "model's length)")
    register_options(p)  # a tagger: --entity K, --token I (entity_explain.py)
    register_answer_options(p)  # question answering: --question, --context, --span... (answer_explain.py)


def register_explain_csv(add: Callable) -> None:
    p = add("explain-csv", cmd_explain_csv,
            "predict and explain every row of a CSV/TSV file (several processes with accelerate launch)")
    p.add_argument("data", help="file with a header row (.csv, .tsv, .txt)")
    p.add_argument("--out", required=True, metavar="PATH",
                   help="results: .csv (every input column as given, then the added bv_* columns; "
                        "one row per input row) "
                        "or .jsonl (the input cells and every token)")
    p.add_argument("--raw", action="store_true",
                   help="CSV without the spreadsheet guard: cells starting with = + - @ are written as given, not with "
                        "a leading ' (a spreadsheet may then run them as formulas)")
    p.add_argument("--text-column", default=None, help="column with the text (default: guessed)")
    p.add_argument("--pair-column", default=None, help="column with a second text, for sentence pairs")
    p.add_argument("--target", default=None, help="class to explain in every row (default: each row's predicted class)")
    p.add_argument("--baseline", default="pad", choices=["pad", "mask", "unk", "zero"])
    p.add_argument("--tolerance", type=float, default=None,
                   help=f"IG steps chosen per text for a relative delta at most this (default: {DEFAULT_TOLERANCE}, "
                        f"unless --n-steps is given); 0: exactly --n-steps (default {FIXED_N_STEPS})")
    p.add_argument("--n-steps", "--steps", type=int, default=None,
                   help="exactly this many IG steps per text instead of choosing them "
                        "(default: chosen, see --tolerance)")
    p.add_argument("--methods", default="ig", metavar="M[,M...]",
                   help="attribution methods, comma-separated: ig, gradient_x_input, saliency, occlusion, kernel_shap, "
                        "lime; each gets its top words, comprehensiveness, sufficiency and seconds per row "
                        "(default: %(default)s)")
    add_engine_options(p)


def register_predict_csv(add: Callable) -> None:
    p = add("predict-csv", cmd_predict_csv, "predict every row of a CSV/TSV file into a CSV or JSONL file")
    p.add_argument("data", help="file with a header row (.csv, .tsv, .txt)")
    p.add_argument("--out", required=True, metavar="PATH",
                   help="results: .csv (every input column as given, then bv_row, bv_prediction, bv_p_<class>..., "
                        "bv_truncated, bv_status, bv_guarded) or .jsonl (the input cells, label, scores)")
    p.add_argument("--raw", action="store_true",
                   help="CSV without the spreadsheet guard (cells starting with = + - @ written as given)")
    p.add_argument("--text-column", default=None, help="column with the text (default: guessed)")
    p.add_argument("--pair-column", default=None, help="column with a second text, for sentence pairs")
    p.add_argument("--raw-probabilities", action="store_true",
                   help="the model's own softmax, without the temperature of the folder's calibration.json")
    add_engine_options(p)
