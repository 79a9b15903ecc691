"""A tagger fine-tune as a plan, as the classifier's is (``plan.plan_finetune`` -> ``runner.run_plan``): ``plan_tagger``
checks everything before training (the files read, the base, the run name, the settings, blank ones automatic) and
``run_tagger_plan`` runs it through ``tagger_run.run_tagger`` with the progress events ``run_plan`` sends, so the
web app's job (``job.FinetuneJob``), its queue and its pages follow a tagger as they follow a classifier."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ...config import Settings
from ...errors import InputError
from ..data.tagged import TaggedFile
from .head_plan import HeadPlan, plan_head, run_head_plan
from .plan import check_val_fraction
from .tagger_run import TASK, TaggerRunResult, data_hash_of, run_tagger

__all__ = ["TAGGER_MODE", "TaggerPlan", "plan_tagger", "run_tagger_plan"]

TAGGER_MODE = "tagger"  # the plan's one mode: every weight trained (no probe: a probe reads [CLS], not each word)


@dataclass(frozen=True, eq=False)
class TaggerPlan(HeadPlan):
    """Everything a tagger run needs, checked: what ``plan_tagger`` returns and ``run_tagger_plan`` executes. Its
    fields are a ``HeadPlan``'s, whose ``modes``, ``names``, ``owner``, ``config``, ``auto`` and ``notices`` are a
    ``FinetunePlan``'s, so the code that queues, claims (public mode) and shows a plan reads either."""

    train: TaggedFile
    val: TaggedFile | None  # None: a seeded ``val_fraction`` of ``train``'s sentences
    modes: tuple[str, ...] = (TAGGER_MODE,)
    task: str = TASK

    @property
    def data_hash(self) -> str:
        return data_hash_of(self.train, self.val)


def plan_tagger(train: TaggedFile, val: TaggedFile | None = None, *, base: str | None = None, name: str | None = None,
                epochs: float | None = None, learning_rate: float | None = None, batch_size: int | None = None,
                warmup_ratio: float | None = None, seed: int = 42, patience: int | None = None,
                val_fraction: float = 0.2, allow_paths: bool | None = None,
                settings: Settings | None = None, freeze_layers: int | None = None) -> TaggerPlan:
    """Check a tagger run before any training: the two files' schemes agree, the base model is found and can be
    fine-tuned, the run name is free, the validation fraction is in range; settings left blank (None) are chosen
    from the number of training sentences as a classifier's are from its rows (``auto_config``).
    ``freeze_layers``: the embeddings and that many bottom layers kept as the base has them, their output computed
    once per sentence (``frozen_features.py``): several times the examples/s, at some cost in entity F1
    (docs/finetune.md); None or 0: every layer trains."""
    check_val_fraction(val_fraction)
    if val is not None and val.scheme != train.scheme:
        raise InputError(f"The training file's tags are {train.scheme} and the validation file's {val.scheme}: "
                         "write both in one scheme.")
    return plan_head(TaggerPlan, train, val, len(train.sentences), mode=TAGGER_MODE, unit="sentences",
                     metric="entity F1", base=base, name=name, epochs=epochs, learning_rate=learning_rate,
                     batch_size=batch_size, warmup_ratio=warmup_ratio, seed=seed, patience=patience,
                     val_fraction=val_fraction, allow_paths=allow_paths, settings=settings,
                     freeze_layers=freeze_layers)


def run_tagger_plan(plan: TaggerPlan, progress: Callable[[dict], None] | None = None,
                    cancel: threading.Event | None = None) -> list[TaggerRunResult]:
    """Run the plan (``run_tagger``), sending ``run_plan``'s events: "mode", then "progress" (the training's
    step, max_steps, eta, logs...), then "result". A cancel within training still saves the best weights so far
    (the result says ``cancelled``)."""
    return run_head_plan(plan, run_tagger, progress, cancel)
