"""Fine-tuning as one service: a labelled table in, registered model folders (models/runs/<name>) out.

The web app's Fine-tune tab and the ``finetune`` command both run exactly this chain::

    plan = plan_finetune(read_table(path), mode="both", settings=settings)  # columns, checks, datasets, settings
    results = run_plan(plan, progress=print, cancel=ev)   # train, evaluate, judge, save atomically
    job = FinetuneJob(plan).start()                       # the same in a worker thread (the web app)
    jobs.submit(owner, plan)                              # as a visitor's one job (FinetuneJobs: the web app)
    plan = plan_tagger(read_tagged(path), settings=settings)  # a tagger: the same job, queue and pages
    plan = plan_reader(read_squad(path), settings=settings)   # a question answering reader (answer_plan)
    push_run(results[-1].name, "me/model", token, models_dir=settings.models_dir)  # optional: to the Hub

Two modes share the data, the split and the metrics, so they can be compared side by side:
- ``full``: every parameter trained as the family's ``*ForSequenceClassification`` trains (HF Trainer,
  see training.py);
- ``probe``: the encoder frozen, a scikit-learn logistic regression fitted on the pooled [CLS]
  features tanh(W h_CLS + b). Its weights *are* a classification head, so a probe run is saved
  as an ordinary ``*ForSequenceClassification`` folder that the explorer opens like any other.
``both`` runs the probe, then full fine-tuning, on the same split.

Settings left blank (epochs, learning rate, batch size, warm-up, early stopping) are chosen from
the data size and the base model (``auto_config``). Every run ends with a ``Verdict``: is the model
clearly better than always answering the majority class, and than the frozen-encoder probe, and
did the training loss fall? If not, it says so in plain words with what to change.

One module per part: ``plan`` (checks before training), ``auto`` (automatic settings), ``runner``
(one run, a plan's runs), ``probe``, ``evaluation``, ``verdict``, ``card`` (run.json and the model
card), ``job`` (the worker thread; each visitor's one job, which outlives its page), ``runs`` (names,
folders, listing), ``hub`` (push); the records are in ``records``. The models folder, device and
limits come from the caller (a ``Settings`` or plain arguments); nothing here reads the environment.
"""

from __future__ import annotations

from ...models.catalog import load_run_info
from ..data import review_columns
from .answer_plan import ReaderPlan, plan_reader, run_reader_plan
from .auto import AUTO_EXAMPLES, AUTO_MAX_EPOCHS, auto_config
from .hub import push_run
from .job import FinetuneJob, FinetuneJobs
from .plan import plan_finetune
from .records import DEFAULT_BASE, MODES, RUN_MODES, FinetunePlan, RunResult, Verdict
from .runner import run_finetune, run_plan
from .runs import base_model_path, list_runs, run_folder, run_stem, valid_run_name, zip_run
from .tagger_plan import TaggerPlan, plan_tagger, run_tagger_plan
from .verdict import judge, majority_baseline

__all__ = [
    "AUTO_EXAMPLES",
    "AUTO_MAX_EPOCHS",
    "DEFAULT_BASE",
    "MODES",
    "RUN_MODES",
    "FinetuneJob",
    "FinetuneJobs",
    "FinetunePlan",
    "ReaderPlan",
    "RunResult",
    "TaggerPlan",
    "Verdict",
    "auto_config",
    "base_model_path",
    "judge",
    "list_runs",
    "load_run_info",
    "majority_baseline",
    "plan_finetune",
    "plan_reader",
    "plan_tagger",
    "push_run",
    "review_columns",
    "run_finetune",
    "run_folder",
    "run_plan",
    "run_reader_plan",
    "run_tagger_plan",
    "run_stem",
    "valid_run_name",
    "zip_run",
]
