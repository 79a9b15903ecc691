"""Running fine-tunes: ``run_finetune`` trains one mode, evaluates, judges and saves the run
atomically; ``run_plan`` runs every mode of a plan on the same split."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path

from ...errors import CancelledError, DataError, InputError
from ...models.catalog import DEFAULT_MODELS_DIR
from ..data import Dataset, split_dataset
from ..frozen_features import frozen_notice
from ..training import SAVE_STEPS, TrainConfig, train_classifier
from .card import calibration_file, run_card, run_record
from .evaluation import evaluate
from .probe import PROBE_REFERENCE_ROWS, probe_reference, train_probe
from .records import RUN_MODES, FinetunePlan, RunResult, Verdict
from .runs import base_model_path, free_name, run_stem, runs_dir, save_run, unused_name
from .verdict import judge, majority_baseline

__all__ = ["MAX_MISCLASSIFIED", "after_training_evals", "cancelled_verdict", "run_finetune", "run_plan", "targets"]

MAX_MISCLASSIFIED = 500
# The probe reference's features per row, in an evaluation's time per validation row (the ETA's allowance for
# it): measured on MiniLM, 320 training + 80 validation rows on a shared 2-core CPU, the work after the last
# step took 29 s where the evaluations during training took 6.4 s each: 0.68 per row after one evaluation and
# the save.
PROBE_ROW_COST = 0.7


def targets(ds: Dataset):
    return ds.multi_hot().tolist() if ds.multi_label else list(ds.labels)


def after_training_evals(n_train: int, n_val: int, probe: bool) -> dict:
    """What a full run does after its last step, for the ETA (``train_classifier``'s after_evals and
    after_steps): the evaluation on the validation rows, the probe reference's features (``probe``:
    over at most PROBE_REFERENCE_ROWS training rows and the validation rows, forward passes like an
    evaluation's, in length-sorted batches of 64: PROBE_ROW_COST of an evaluation's time per row) and
    the save."""
    per_val = 1.0 / max(1, n_val)
    features = (min(n_train, PROBE_REFERENCE_ROWS) + n_val) * per_val * PROBE_ROW_COST if probe else 0.0
    return {"after_evals": 1.0 + features, "after_steps": float(SAVE_STEPS)}


def run_finetune(
    train: Dataset,
    val: Dataset | None = None,
    base: str = "default",
    mode: str = "full",
    name: str | None = None,
    config: TrainConfig | None = None,
    val_fraction: float = 0.2,
    source: str = "",
    progress: Callable[[dict], None] | None = None,
    cancel: threading.Event | None = None,
    probe: dict | None = None,
    allow_paths: bool = True,
    owner: str | None = None,
    *,
    models_dir: Path = DEFAULT_MODELS_DIR,
    device: str = "auto",
    world_size: int = 1,
    given: Collection[str] | None = None,
) -> RunResult:
    """Train one mode, evaluate on the validation split, judge and save ``models_dir/runs/<name>``
    atomically.

    Without ``val`` a stratified split of ``train`` (fixed seed) is used. ``cancel.set()`` stops
    within a step; the best weights so far are still evaluated and saved (``cancelled=True``).
    A full run is judged against the frozen-encoder probe on the same split: ``probe`` (its
    metrics, e.g. from a probe run just before) or else a probe fitted here on at most
    PROBE_REFERENCE_ROWS training rows (not saved). ``device``: where the probe computes its
    features (full training places itself, see ``training.train_classifier``); ``world_size``: the
    processes training together (``accelerate launch``), of which only the main one saves; the
    others return ``None``. ``given``: the settings of ``config`` the user chose (the verdict advises
    only about those; None: all of a given ``config``, none of the default one)."""
    if mode not in RUN_MODES:
        raise InputError(f"Unknown mode {mode!r}: choose full or probe (or both, through plan_finetune).")
    config_given, config = config is not None, config or TrainConfig()
    if name is not None:
        name = unused_name(name, models_dir)
    # The hash of the data as given (before any split) identifies "the same data" across runs.
    data_hash = train.data_hash if val is None else f"{train.data_hash}+{val.data_hash}"
    train, val, notices = _split(train, val, val_fraction, config.seed)
    base_path = base_model_path(base, allow_paths=allow_paths, models_dir=models_dir)
    started = time.time()
    model, tokenizer, info = _train(mode, base_path, train, val, config, progress, cancel, device=device,
                                    world_size=world_size, probe_after=probe is None)
    if not info.get("is_main_process", True):
        return None  # type: ignore[return-value]
    if mode == "full" and (note := frozen_notice(info)):
        notices.append(note)
    metrics, wrong = evaluate(model, tokenizer, val, info["max_length"])
    seconds = time.time() - started
    if mode == "full" and probe is None and not info.get("cancelled"):
        probe = _probe_reference(base_path, train, val, config, cancel, device)
    chosen = set(given if given is not None else info["config"] if config_given else ())
    verdict = _verdict(metrics, train, val, info, mode=mode, probe=probe, chosen=chosen)
    name = name or free_name(run_stem(mode, data_hash), models_dir)
    dest = runs_dir(models_dir) / name
    record = run_record(f"runs/{name}", mode=mode, base=base, source=source, data_hash=data_hash, train=train,
                        val=val, metrics=metrics, misclassified=wrong[:MAX_MISCLASSIFIED], info=info,
                        seconds=seconds, notices=notices, verdict=verdict, owner=owner)
    save_run(model, tokenizer, dest, record, info, run_card(record), calibration_file(metrics))
    return RunResult(
        name=f"runs/{name}", path=dest, mode=mode, base=base, metrics=metrics, misclassified=wrong,
        labels=tuple(train.label_names), log_history=info.get("log_history", []), seconds=seconds,
        examples_per_second=info.get("examples_per_second"), data_hash=data_hash,
        cancelled=bool(info.get("cancelled")), stopped_early=bool(info.get("stopped_early")),
        stopped_by=info.get("stopped_by"), notices=tuple(notices),
        verdict=verdict, hyperparameters=dict(info["config"]),
    )


def _train(mode: str, base_path: Path, train: Dataset, val: Dataset, config: TrainConfig,
           progress: Callable[[dict], None] | None, cancel: threading.Event | None, *, device: str,
           world_size: int, probe_after: bool):
    """(model, tokenizer, info) of one mode: every parameter trained (full), or a probe fitted on the frozen
    encoder. ``probe_after``: a full run's ETA allows for the probe reference fitted after it."""
    if mode == "full":
        return train_classifier(
            base_path, train.label_names, train.texts, targets(train), val.texts, targets(val),
            train.pairs, val.pairs, config=config, multi_label=train.multi_label, progress=progress, cancel=cancel,
            world_size=world_size, **after_training_evals(len(train), len(val), probe_after),
        )
    return train_probe(base_path, train, config, progress, cancel, device)


def _probe_reference(base_path: Path, train: Dataset, val: Dataset, config: TrainConfig,
                     cancel: threading.Event | None, device: str) -> dict | None:
    """The frozen-encoder probe's metrics on the same split, to judge a full run by; None when cancelled now."""
    try:
        return probe_reference(base_path, train, val, config, cancel, device)
    except CancelledError:  # cancelled now: save the trained weights, judged without the probe
        return None


def _verdict(metrics: dict, train: Dataset, val: Dataset, info: dict, *, mode: str, probe: dict | None,
             chosen: set) -> Verdict:
    """The run judged, with advice only about the ``chosen`` settings; a cancelled run is not judged."""
    verdict = judge(metrics, majority_baseline(train, val), mode=mode, log_history=info.get("log_history", []),
                    probe=probe, hyperparameters={k: v for k, v in info["config"].items() if k in chosen},
                    n_train=len(train), stopped_early=bool(info.get("stopped_early")), multi_label=train.multi_label)
    if info.get("cancelled"):  # a partial run: its metrics say nothing of whether the model learns
        verdict = cancelled_verdict(verdict, info)
    return verdict


def cancelled_verdict(verdict: Verdict, info: dict) -> Verdict:
    """The verdict of a run cancelled before its end: status "cancelled", never "learned" (the judgement
    of its partial metrics is dropped; the baselines stay for reference)."""
    steps, most = info.get("steps"), info.get("max_steps")
    at = f" at step {steps} of {most}" if isinstance(steps, int) and isinstance(most, int) else ""
    return replace(verdict, status="cancelled", heading="Cancelled: not judged.",
                   message=(f"Cancelled{at}, so not judged: the metrics are those of a partial run (the best weights "
                            "before the cancel) and do not say whether the model learns."),
                   suggestions=("Train again and let the run finish to find out whether the model learns.",))


def _split(train: Dataset, val: Dataset | None, val_fraction: float, seed: int) -> tuple[Dataset, Dataset, list[str]]:
    """(train, validation, notices): a stratified split of ``train`` when there is no ``val``."""
    notices: list[str] = []
    if val is None:
        train, val, split_notices = split_dataset(train, val_fraction=val_fraction, seed=seed)
        notices.extend(split_notices)
    elif tuple(val.label_names) != tuple(train.label_names):
        raise DataError(
            "The validation data's classes are not indexed like the training data's: build it with "
            "data.validation_dataset(train, table, ...)."
        )
    if len(train) < 2 or len(val) < 1:
        raise DataError(f"Too little data: {len(train)} training and {len(val)} validation rows. Add rows.")
    return train, val, notices


def run_plan(plan: FinetunePlan, progress: Callable[[dict], None] | None = None,
             cancel: threading.Event | None = None) -> list[RunResult]:
    """Run every mode of the plan on the same split, the probe first in "both" mode (its metrics
    then judge the full run). ``progress`` gets dicts with ``kind``: "mode" (mode, index, of),
    "progress" (a training event: step, max_steps, eta, logs...) and "result" (result).
    A cancel keeps the runs already saved; raises CancelledError when nothing was saved."""
    results: list[RunResult] = []
    probe = None
    emit = progress or (lambda e: None)
    for k, (mode, name) in enumerate(zip(plan.modes, plan.names), start=1):
        if cancel is not None and cancel.is_set():
            break
        emit({"kind": "mode", "mode": mode, "index": k, "of": len(plan.modes)})
        try:
            res = run_finetune(plan.train, plan.val, base=plan.base, mode=mode, name=name, config=plan.config,
                               val_fraction=plan.val_fraction, source=plan.source, cancel=cancel, probe=probe,
                               allow_paths=plan.allow_paths, owner=plan.owner, models_dir=plan.models_dir,
                               device=plan.device, world_size=plan.world_size, given=plan.given,
                               progress=lambda e, m=mode, k=k: emit({"kind": "progress", "mode": m, "index": k,
                                                                       "of": len(plan.modes), **e}))
        except CancelledError:
            if results:
                break
            raise
        if res is None:  # a non-main process under accelerate launch
            return []
        if mode == "probe":
            probe = res.metrics
        results.append(res)
        emit({"kind": "result", "mode": mode, "index": k, "of": len(plan.modes), "result": res})
    if not results:
        raise CancelledError("Training was cancelled before anything was saved.")
    return results
