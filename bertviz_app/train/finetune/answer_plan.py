"""A question answering fine-tune as a plan, as the tagger's is (``tagger_plan``): ``plan_reader`` checks everything
before training (the files read, the base, the run name, the settings, blank ones automatic) and ``run_reader_plan``
runs it through ``answer_run.run_reader`` with the progress events ``runner.run_plan`` sends ("mode", "progress",
"result"), so a job, its queue and its pages can follow a reader as they follow a tagger."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ...config import Settings
from ..data.squad import QAFile
from .answer_run import QA_TASK, AnswerRunResult, answer_data_hash, run_reader
from .head_plan import HeadPlan, plan_head, run_head_plan
from .plan import check_val_fraction

__all__ = ["READER_MODE", "ReaderPlan", "plan_reader", "run_reader_plan"]

READER_MODE = "reader"  # the plan's one mode: every weight trained, the span head fresh or the base's own


@dataclass(frozen=True, eq=False)
class ReaderPlan(HeadPlan):
    """Everything a reader run needs, checked: what ``plan_reader`` returns and ``run_reader_plan`` executes. Its
    fields are a ``HeadPlan``'s, as a ``TaggerPlan``'s are."""

    train: QAFile
    val: QAFile | None  # None: a seeded ``val_fraction`` of ``train``'s contexts
    modes: tuple[str, ...] = (READER_MODE,)
    task: str = QA_TASK

    @property
    def data_hash(self) -> str:
        return answer_data_hash(self.train, self.val)


def plan_reader(train: QAFile, val: QAFile | None = None, *, base: str | None = None, name: str | None = None,
                epochs: float | None = None, learning_rate: float | None = None, batch_size: int | None = None,
                warmup_ratio: float | None = None, seed: int = 42, patience: int | None = None,
                val_fraction: float = 0.2, allow_paths: bool | None = None,
                settings: Settings | None = None, freeze_layers: int | None = None) -> ReaderPlan:
    """Check a reader run before any training: the base model is found and can be fine-tuned, the run name is free,
    the validation fraction is in range; settings left blank (None) are chosen from the number of training
    questions as a classifier's are from its rows (``auto_config``)."""
    check_val_fraction(val_fraction)
    return plan_head(ReaderPlan, train, val, len(train.examples), mode=READER_MODE, unit="questions", metric="F1",
                     base=base, name=name, epochs=epochs, learning_rate=learning_rate, batch_size=batch_size,
                     warmup_ratio=warmup_ratio, seed=seed, patience=patience, val_fraction=val_fraction,
                     allow_paths=allow_paths, settings=settings, freeze_layers=freeze_layers)


def run_reader_plan(plan: ReaderPlan, progress: Callable[[dict], None] | None = None,
                    cancel: threading.Event | None = None) -> list[AnswerRunResult]:
    """Run the plan (``run_reader``), sending ``run_plan``'s events: "mode", then "progress" (the training's step,
    max_steps, eta, logs with eval_exact and eval_f1...), then "result". A cancel within training still saves the
    best weights so far (the result says ``cancelled``)."""
    return run_head_plan(plan, run_reader, progress, cancel)
