"""The records of the fine-tune service: what a plan holds (``FinetunePlan``), what a run returns
(``RunResult``) and its judgement (``Verdict``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...models.catalog import DEFAULT_MODELS_DIR, ENCODER
from ..data import Dataset
from ..training import TrainConfig

__all__ = ["DEFAULT_BASE", "MODES", "RUN_MODES", "FinetunePlan", "RunResult", "Verdict"]

RUN_MODES = ("full", "probe")
MODES = ("full", "probe", "both")  # "both": probe, then full, on the same split
# The base a fine-tune starts from unless told otherwise (tab and CLI alike): the bare encoder is
# always installed (no build needed) and carries no task of its own, so a new task's classes start
# from general-purpose features instead of a sentiment model's.
DEFAULT_BASE = ENCODER


@dataclass(frozen=True)
class Verdict:
    """Did the run learn? ``status`` is learned, weak (only a little better than the majority class,
    behind the probe beyond noise, or right but unsure with a flat loss) or not_learned; ``heading``
    says which in a few words (the page shows it in bold), ``message`` in plain words with the
    numbers and ``suggestions`` what to change."""

    status: str
    message: str
    suggestions: tuple[str, ...]
    majority: dict  # class, accuracy, macro_f1 of always answering the training set's most common class
    probe: dict | None = None  # accuracy, macro_f1 of the frozen-encoder probe on the same split (full runs)
    loss_start: float | None = None
    loss_end: float | None = None
    mean_confidence: float | None = None  # mean top probability on the validation rows
    val_nll: float | None = None  # mean cross-entropy of the true labels on the validation rows (kept checkpoint)
    ece: float | None = None  # expected calibration error of the top probability, 15 equal-width bins
    heading: str = ""  # e.g. "Weak: below the probe." ("": an older record; the page falls back on the status)

    @property
    def learned(self) -> bool:
        return self.status == "learned"


@dataclass(frozen=True)
class RunResult:
    name: str  # registered name, "runs/<name>"
    path: Path
    mode: str
    base: str
    metrics: dict  # accuracy, macro_f1, per_class, confusion_matrix, n, mean_confidence, val_nll, ece
    misclassified: list[dict]  # validation rows the model gets wrong: row, text, pair, true, predicted, confidence
    labels: tuple[str, ...]
    log_history: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    examples_per_second: float | None = None
    data_hash: str = ""
    cancelled: bool = False
    stopped_early: bool = False
    stopped_by: str | None = None  # "metric" (macro-F1) or "loss" (validation loss) when stopped early
    notices: tuple[str, ...] = ()
    verdict: Verdict | None = None
    hyperparameters: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["path"] = str(self.path)
        if self.verdict is not None:
            d["verdict"]["learned"] = self.verdict.learned
        return d


@dataclass(frozen=True, eq=False)
class FinetunePlan:
    """Everything a run needs, checked: what ``plan_finetune`` returns and ``run_plan`` executes."""

    train: Dataset
    val: Dataset | None  # None: a stratified split of ``train`` (``val_fraction``, the config's seed)
    base: str
    modes: tuple[str, ...]  # ("full",), ("probe",) or ("probe", "full")
    names: tuple[str | None, ...]  # one per mode; None = automatic
    config: TrainConfig
    val_fraction: float
    source: str  # the training file's name, for the run card
    columns: tuple[str, str, str | None]  # text, label, pair
    notices: tuple[str, ...] = ()  # column guesses, read and validation-file notices
    warnings: tuple[str, ...] = ()  # the validation report's warnings (training goes on)
    auto: tuple[str, ...] = ()  # how each automatic setting was chosen
    given: tuple[str, ...] = ()  # the TrainConfig settings the user gave (epochs, learning_rate...); the rest automatic
    allow_paths: bool = True  # ``base`` may be a folder
    owner: str | None = None  # public mode: the visitor's owner hash, saved with each run (visitors.py)
    models_dir: Path = DEFAULT_MODELS_DIR  # the registry the runs are saved in (models_dir/runs/<name>)
    device: str = "auto"  # where the probe computes its features ("auto": cuda, then mps, then cpu)
    world_size: int = 1  # processes training together (accelerate launch / torchrun)

    @property
    def data_hash(self) -> str:
        """The training data's hash (a ``TaggerPlan`` has one too: what names a run nobody named)."""
        return self.train.data_hash

