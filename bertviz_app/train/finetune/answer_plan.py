"""A question answering fine-tune as a plan, as the tagger's is (``tagger_plan``): ``plan_reader`` checks everything
before training (the files read, the base, the run name, the settings, blank ones automatic) and ``run_reader_plan``
runs it through ``answer_run.run_reader`` with the progress events ``runner.run_plan`` sends ("mode", "progress",
"result"), so a job, its queue and its pages can follow a reader as they follow a tagger."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...config import Settings
from ...errors import InputError
from ...models.catalog import DEFAULT_MODELS_DIR
from ..data.squad import QAFile
from ..training import TrainConfig
from .answer_run import QA_TASK, AnswerRunResult, answer_data_hash, run_reader
from .auto import auto_config, base_hidden_size
from .plan import run_names
from .records import DEFAULT_BASE
from .runs import base_model_path

__all__ = ["READER_MODE", "ReaderPlan", "plan_reader", "run_reader_plan"]

READER_MODE = "reader"  # the plan's one mode: every weight trained, the span head fresh or the base's own


@dataclass(frozen=True, eq=False)
class ReaderPlan:
    """Everything a reader run needs, checked: what ``plan_reader`` returns and ``run_reader_plan`` executes. Its
    ``modes``, ``names``, ``owner``, ``config``, ``auto`` and ``notices`` are a ``TaggerPlan``'s."""

    train: QAFile
    val: QAFile | None  # None: a seeded ``val_fraction`` of ``train``'s contexts
    base: str
    names: tuple[str | None, ...]  # one name (None = automatic)
    config: TrainConfig
    val_fraction: float
    source: str  # the training file's name, for the run card
    notices: tuple[str, ...] = ()
    auto: tuple[str, ...] = ()
    given: tuple[str, ...] = ()
    allow_paths: bool = True
    owner: str | None = None
    models_dir: Path = DEFAULT_MODELS_DIR
    modes: tuple[str, ...] = (READER_MODE,)
    task: str = QA_TASK

    @property
    def data_hash(self) -> str:
        return answer_data_hash(self.train, self.val)


def plan_reader(train: QAFile, val: QAFile | None = None, *, base: str | None = None, name: str | None = None,
                epochs: float | None = None, learning_rate: float | None = None, batch_size: int | None = None,
                warmup_ratio: float | None = None, seed: int = 42, patience: int | None = None,
                val_fraction: float = 0.2, allow_paths: bool | None = None,
                settings: Settings | None = None) -> ReaderPlan:
    """Check a reader run before any training: the base model is found and can be fine-tuned, the run name is free,
    the validation fraction is in range; settings left blank (None) are chosen from the number of training
    questions as a classifier's are from its rows (``auto_config``)."""
    settings = settings if settings is not None else Settings()
    if not 0.05 <= float(val_fraction) <= 0.5:
        raise InputError(f"The validation fraction must be between 0.05 and 0.5 (got {val_fraction}).")
    allow = settings.allow_local_paths if allow_paths is None else bool(allow_paths)
    base = (base or "").strip() or DEFAULT_BASE
    base_path = base_model_path(base, allow_paths=allow, models_dir=settings.models_dir)
    names = run_names(name, (READER_MODE,), settings.models_dir)
    n = len(train.examples)
    n_train = n if val is not None else max(1, n - max(1, round(n * float(val_fraction))))
    config, auto = auto_config(n_train, base_hidden_size(base_path), epochs=epochs, learning_rate=learning_rate,
                               batch_size=batch_size, warmup_ratio=warmup_ratio, patience=patience, seed=seed)
    auto = tuple(a.replace("training rows", "training questions").replace("macro-F1", "F1") for a in auto)
    given = tuple(k for k, v in (("epochs", epochs), ("learning_rate", learning_rate), ("batch_size", batch_size),
                                 ("warmup_ratio", warmup_ratio), ("early_stopping_patience", patience))
                  if v is not None)
    notices = tuple(train.notices) + tuple(f"validation file: {n}" for n in (val.notices if val is not None else ()))
    return ReaderPlan(train=train, val=val, base=base, names=names, config=config, val_fraction=float(val_fraction),
                      source=train.name, notices=notices, auto=auto, given=given, allow_paths=allow,
                      models_dir=Path(settings.models_dir))


def run_reader_plan(plan: ReaderPlan, progress: Callable[[dict], None] | None = None,
                    cancel: threading.Event | None = None) -> list[AnswerRunResult]:
    """Run the plan (``run_reader``), sending ``run_plan``'s events: "mode", then "progress" (the training's step,
    max_steps, eta, logs with eval_exact and eval_f1...), then "result". A cancel within training still saves the
    best weights so far (the result says ``cancelled``)."""
    emit = progress or (lambda e: None)
    mode = plan.modes[0]
    emit({"kind": "mode", "mode": mode, "index": 1, "of": 1})
    res = run_reader(plan.train, plan.val, base=plan.base, name=plan.names[0], config=plan.config,
                     val_fraction=plan.val_fraction, source=plan.source, cancel=cancel, allow_paths=plan.allow_paths,
                     owner=plan.owner, models_dir=plan.models_dir,
                     progress=lambda e: emit({"kind": "progress", "mode": mode, "index": 1, "of": 1, **e}))
    emit({"kind": "result", "mode": mode, "index": 1, "of": 1, "result": res})
    return [res]
