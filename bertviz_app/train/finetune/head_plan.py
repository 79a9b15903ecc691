"""What the one-mode fine-tunes of a head other than the classifier's (the tagger's, ``tagger_plan``; the reader's,
``answer_plan``) plan and run alike: ``HeadPlan``, the fields of such a plan (its ``modes``, ``names``, ``owner``,
``config``, ``auto`` and ``notices`` are a ``FinetunePlan``'s, so the code that queues, claims (public mode) and
shows a plan reads any); ``plan_head``, its checks and automatic settings; ``run_head_plan``, its run with the
progress events ``runner.run_plan`` sends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ...config import Settings
from ...models.catalog import DEFAULT_MODELS_DIR
from ..training import TrainConfig
from .plan import plan_base, plan_settings, run_names

__all__ = ["HeadPlan", "plan_head", "run_head_plan"]


@dataclass(frozen=True, eq=False)
class HeadPlan:
    """Everything a one-mode run of a head needs, checked. A head's plan names the types of its files (``train``,
    ``val``) and the defaults of its ``modes`` (its one mode) and ``task``."""

    train: Any  # the training file, as read (a TaggedFile, a QAFile)
    val: Any  # None: a seeded ``val_fraction`` of ``train``
    base: str
    names: tuple[str | None, ...]  # one name (None = automatic)
    config: TrainConfig
    val_fraction: float
    source: str  # the training file's name, for the run card
    notices: tuple[str, ...] = ()
    auto: tuple[str, ...] = ()
    given: tuple[str, ...] = ()
    allow_paths: bool = True
    owner: str | None = None  # public mode: the visitor's owner hash, saved with the run (visitors.py)
    models_dir: Path = DEFAULT_MODELS_DIR
    modes: tuple[str, ...] = ()
    task: str = ""


PlanT = TypeVar("PlanT", bound=HeadPlan)
ResultT = TypeVar("ResultT")


def plan_head(plan: type[PlanT], train, val, n: int, *, mode: str, unit: str, metric: str, base: str | None,
              name: str | None, epochs: float | None, learning_rate: float | None, batch_size: int | None,
              warmup_ratio: float | None, seed: int, patience: int | None, val_fraction: float,
              allow_paths: bool | None, settings: Settings | None, freeze_layers: int | None = None) -> PlanT:
    """A ``plan`` for the run ``mode`` of a head on ``train``'s ``n`` examples (and ``val``'s): the base model found
    and one that can be fine-tuned, the run name free, settings left blank (None) chosen from the number of training
    examples (all of ``train`` beside a ``val``, else what a seeded ``val_fraction`` leaves: at least one held out) as
    a classifier's are from its rows (``auto_config``), told in ``unit`` ("training sentences") and ``metric``
    ("entity F1"). The validation fraction is the caller's to check first (``check_val_fraction``)."""
    settings = settings if settings is not None else Settings()
    base, base_path, allow = plan_base(base, allow_paths, settings)
    names = run_names(name, (mode,), settings.models_dir)
    n_train = n if val is not None else max(1, n - max(1, round(n * float(val_fraction))))
    config, auto, given = plan_settings(n_train, base_path, epochs=epochs, learning_rate=learning_rate,
                                        batch_size=batch_size, warmup_ratio=warmup_ratio, patience=patience, seed=seed,
                                        freeze_layers=freeze_layers)
    auto = tuple(a.replace("training rows", f"training {unit}").replace("macro-F1", metric) for a in auto)
    notices = tuple(train.notices) + tuple(f"validation file: {n}" for n in (val.notices if val is not None else ()))
    return plan(train=train, val=val, base=base, names=names, config=config, val_fraction=float(val_fraction),
                source=train.name, notices=notices, auto=auto, given=given, allow_paths=allow,
                models_dir=Path(settings.models_dir))


def run_head_plan(plan: HeadPlan, run: Callable[..., ResultT], progress: Callable[[dict], None] | None = None,
                  cancel: threading.Event | None = None) -> list[ResultT]:
    """Run the plan's one mode (``run``: ``run_tagger``, ``run_reader``), sending ``run_plan``'s events: "mode",
    then "progress" (the training's step, max_steps, eta, logs...), then "result"."""
    emit = progress or (lambda e: None)
    mode = plan.modes[0]
    emit({"kind": "mode", "mode": mode, "index": 1, "of": 1})
    res = run(plan.train, plan.val, base=plan.base, name=plan.names[0], config=plan.config,
              val_fraction=plan.val_fraction, source=plan.source, cancel=cancel, allow_paths=plan.allow_paths,
              owner=plan.owner, models_dir=plan.models_dir,
              progress=lambda e: emit({"kind": "progress", "mode": mode, "index": 1, "of": 1, **e}))
    emit({"kind": "result", "mode": mode, "index": 1, "of": 1, "result": res})
    return [res]
