"""Settings: every knob the app has, with plain defaults, and ``Settings.from_env`` to read them
from ``BERTVIZ_*`` environment variables (documented in docs/settings.md).

Only the entry points (``app.py``, the CLI, the server, bench scripts) call ``from_env``; they
hand the ``Settings`` (or the values it holds) down to the library, which never reads the
environment itself. ``Settings()`` is the defaults, whatever the environment says.

Every limit the app enforces on untrusted input lives here with a safe default, so a Space
operator can change it without touching code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

__all__ = ["Settings", "PROJECT_ROOT", "env_name"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _parse(f, raw: str):
    """The value of the Settings field ``f`` written as the environment string ``raw``."""
    kind = f.type if isinstance(f.type, str) else f.type.__name__
    text = raw.strip()
    if kind == "bool":
        if text.lower() not in _TRUE + _FALSE:
            raise ValueError(f"{env_name(f)} must be 1 or 0 (true/false, yes/no, on/off), got {text!r}")
        return text.lower() in _TRUE
    if kind in ("int", "float"):
        try:
            return int(text) if kind == "int" else float(text)
        except ValueError:
            raise ValueError(f"{env_name(f)} must be {'an integer' if kind == 'int' else 'a number'}, "
                             f"got {text!r}") from None
    if kind == "Path":
        return Path(raw)
    return raw


# integer settings for which 0 is allowed, and what it means
ZERO_MEANS = {"memo_size": "no cache", "mmap_threshold_kb": "glibc's default",
              "build_max_train_rows": "every review", "build_test_size": "the build's default",
              "build_tagger_sentences": "every sentence"}


@dataclass(frozen=True)
class Settings:
    models_dir: Path = field(
        default=PROJECT_ROOT / "models",
        metadata={"help": "Folder holding registered models (default/, runs/<name>/)."},
    )
    default_model: str = field(
        default="default",
        metadata={"help": "Model the app opens with: a registered name, a folder or a Hub id.", "env": "MODEL"},
    )
    device: str = field(
        default="auto",
        metadata={"help": "auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps."},
    )
    gpu_dtype: str = field(
        default="auto",
        metadata={"help": "Inference dtype on CUDA: auto (bf16 if supported, else fp16), bf16, fp16, fp32."},
    )
    host: str = field(
        default="127.0.0.1",
        metadata={"help": "Address the app listens on: 127.0.0.1 (this machine only, the default: the app opens local "
                  "folders and fine-tunes on uploads) or 0.0.0.0 (every interface; the Docker image sets it)."},
    )
    port: int = field(default=7860, metadata={"help": "Port the app listens on."})
    cpu_int8: bool = field(
        default=False,
        metadata={"help": "Predict with int8 dynamically quantised Linear layers on a CPU (about 1.6x faster "
                  "on the 2-core bench machine, held-out accuracy 0.836 -> 0.826 on 1,000 reviews; attention maps and "
                  "attributions stay float32). Off by default."},
    )
    # Speed options of the analyses. Each is also a keyword argument of the call it affects
    # (predict / attribute...), so a benchmark or a test changes one call, never the process.
    predict_attention: str = field(
        default="auto",
        metadata={"help": "Attention kernel for predictions: auto (SDPA for batches padded to 128 tokens or more, "
                  "eager below; the faster one on the bench machine), eager or sdpa."},
    )
    ig_attention: str = field(
        default="sdpa",
        metadata={"help": "Attention kernel for the Integrated Gradients passes: sdpa or eager."},
    )
    sort_by_length: bool = field(
        default=True,
        metadata={"help": "Sort a predict call's texts by token count before batching, so each batch pads little."},
    )
    cls_only_last_layer: bool = field(
        default=True,
        metadata={"help": "Compute the last encoder layer for [CLS] alone in predictions and attributions "
                  "(the classifier reads only [CLS]; same logits, fewer FLOPs)."},
    )
    memo_size: int = field(
        default=256,
        metadata={"help": "Attributions kept per loaded model, so one asked again costs nothing (LRU; 0 turns "
                  "the cache off). Read when a model is loaded."},
    )
    max_chars: int = field(
        default=20000,
        metadata={"help": "Longest text accepted, in characters (longer is refused with a message)."},
    )
    max_batch_texts: int = field(
        default=10000,
        metadata={"help": "Most texts one predict call accepts."},
    )
    max_n_steps: int = field(
        default=500,
        metadata={"help": "Largest Integrated Gradients n_steps accepted."},
    )
    # 0.05 = five percentage points of the target's probability. A text whose probability sits
    # closer than that to the baseline's is classified almost like the empty input: IG then splits
    # next to nothing among the tokens, and which tokens get the crumbs flips with the baseline and
    # n_steps. It is also the 5% the app already uses as its trust line for the convergence delta.
    min_change: float = field(
        default=0.05,
        metadata={"help": "Smallest change f(x) - f(baseline) in the explained probability worth reading: below "
                  "it an attribution says plainly that there is almost nothing to explain, and its colours are drawn "
                  "against this change (pale unless single tokens score that much; logit outputs use 4x this, since a "
                  "probability moves at most 1/4 as fast as its logit)."},
    )
    max_method_seconds: float = field(
        default=60,
        metadata={"help": "Longest estimated run, in seconds, of an attribution method whose cost grows with the "
                  "number of words (occlusion, KernelSHAP, LIME); longer is refused up front with the estimate and a "
                  "cheaper method to use."},
    )
    queue_size: int = field(
        default=256,
        metadata={"help": "Requests that may wait in the web app's queue; beyond it a request is refused at "
                  "once with a 'busy, try again' message instead of waiting without end."},
    )
    mmap_threshold_kb: int = field(
        default=2048,
        metadata={"help": "The served app asks glibc to hand memory blocks of this size and larger straight "
                  "back to the system when they are freed (0: leave glibc's default, which raises its threshold "
                  "as large tensors come and go and keeps their memory: 1.7 GB RSS after the load test "
                  "instead of 0.7 GB)."},
    )
    allow_local_paths: bool = field(
        default=True,
        metadata={"help": "Let the web app open model folders by path (off on public deployments: names "
                  "are then confined to models/ and Hub ids)."},
    )

    max_upload_mb: float = field(
        default=50,
        metadata={"help": "Largest training/validation file accepted, in megabytes (10**6 bytes)."},
    )
    max_rows: int = field(
        default=200000,
        metadata={"help": "Most data rows a training/validation file may have."},
    )
    max_evaluate_mb: float = field(
        default=2,
        metadata={"help": "Largest POST /v1/evaluate body, in megabytes (10**6 bytes): a small labelled CSV sent as "
                  "JSON (larger files: `bertviz-app evaluate FILE`). Over it: 413."},
    )
    min_class_examples: int = field(
        default=2,
        metadata={"help": "Fewest examples a class needs before training starts (2 lets a split keep one aside)."},
    )
    warn_class_examples: int = field(
        default=10,
        metadata={"help": "Classes with fewer examples than this get a warning (too few to learn well)."},
    )

    # Public mode (a shared Space): each visitor's runs, uploads and outputs are theirs alone, within limits.
    public: bool = field(
        default=False,
        metadata={"help": "Public mode (the Docker image sets it): each browser's fine-tuned runs, uploads and "
                  "outputs are its own (an owner token kept in the browser, stored hashed with the run); others "
                  "get the same answer as for a model that does not exist. Runs and uploads are limited (below), "
                  "runs not opened for BERTVIZ_RUN_TTL_HOURS are removed, and folders cannot be opened by path. "
                  "Off by default: on one's own machine every run is shared, as before."},
    )
    max_runs_per_visitor: int = field(
        default=3,
        metadata={"help": "Public mode: most runs one visitor keeps (past it: delete one, the oldest is named)."},
    )
    max_evaluations_per_visitor: int = field(
        default=10,
        metadata={"help": "Public mode: most stored evaluations (Evaluate tab) one visitor keeps; one more removes "
                  "their oldest (the page says which)."},
    )
    max_runs_total: int = field(
        default=30,
        metadata={"help": "Public mode: most visitors' runs the server keeps in all."},
    )
    max_runs_disk_gb: float = field(
        default=3,
        metadata={"help": "Public mode: most disk the saved runs may take, in GB (10**9 bytes); a fine-tune "
                  "is refused once they take this much."},
    )
    run_ttl_hours: float = field(
        default=24,
        metadata={"help": "Public mode: a visitor's run not opened for this many hours is removed by the sweeper."},
    )
    finetune_queue: int = field(
        default=10,
        metadata={"help": "Public mode: fine-tunes that may wait for the one that runs (each visitor one at a "
                  "time; a waiting visitor sees their position); beyond it a request is refused."},
    )
    max_uploads_per_hour: int = field(
        default=20,
        metadata={"help": "Public mode: most files one visitor may upload in an hour (each is deleted once read)."},
    )

    # The background build of the default model (app.py starts it when models/default is missing).
    # 0: the build's own defaults. Reduced builds for tests and CI: the same code path on fewer reviews.
    build_max_train_rows: int = field(
        default=0, metadata={"help": "Train the background default-model build on this many reviews (0: all)."})
    build_test_size: int = field(
        default=0, metadata={"help": "Held-out reviews of the background build (0: the build's default, 2000)."})
    build_epochs: float = field(
        default=0.0, metadata={"help": "Passes over the data of the background build (0: the build's default, 1)."})
    build_tagger: bool = field(
        default=True, metadata={"help": "After the default model, build the default tagger (models/default-tagger) "
                                "in the background when it is missing (needs spaCy: scripts/setup.sh installs it)."})
    build_tagger_sentences: int = field(
        default=0, metadata={"help": "Sentences the background default-tagger build labels and learns from "
                             "(0: all of them)."})
    debug: bool = field(
        default=False, metadata={"help": "The CLI prints the traceback of an unexpected error (off: one line)."})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from ``BERTVIZ_*`` variables of ``environ`` (default: this process's environment);
        unset or empty variables keep the defaults. ValueError names a variable that cannot be read."""
        environ = os.environ if environ is None else environ
        given = {}
        for f in fields(cls):
            raw = environ.get(env_name(f), "")
            if raw.strip():
                given[f.name] = _parse(f, raw)
        return cls(**given)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ZERO_MEANS:
                if value < 0:
                    raise ValueError(f"{env_name(f)} must be 0 ({ZERO_MEANS[f.name]}) or a positive integer, "
                                     f"got {value}")
            elif isinstance(value, int) and not isinstance(value, bool) and value <= 0:
                raise ValueError(f"{env_name(f)} must be a positive integer, got {value}")
        if self.predict_attention not in ("auto", "eager", "sdpa"):
            raise ValueError(f"BERTVIZ_PREDICT_ATTENTION must be auto, eager or sdpa, got {self.predict_attention!r}")
        if self.ig_attention not in ("eager", "sdpa"):
            raise ValueError(f"BERTVIZ_IG_ATTENTION must be sdpa or eager, got {self.ig_attention!r}")
        if not 0 <= self.min_change < 1:
            raise ValueError(f"BERTVIZ_MIN_CHANGE must be a probability change from 0 to below 1, "
                             f"got {self.min_change}")
        if self.build_epochs < 0:
            raise ValueError(f"BERTVIZ_BUILD_EPOCHS must be 0 (the build's default) or a positive number, "
                             f"got {self.build_epochs}")
        if not self.max_method_seconds > 0:
            raise ValueError(f"BERTVIZ_MAX_METHOD_SECONDS must be a positive number, got {self.max_method_seconds}")
        if not self.max_upload_mb > 0:
            raise ValueError(f"BERTVIZ_MAX_UPLOAD_MB must be a positive number, got {self.max_upload_mb}")
        if not self.max_evaluate_mb > 0:
            raise ValueError(f"BERTVIZ_MAX_EVALUATE_MB must be a positive number, got {self.max_evaluate_mb}")
        for name in ("max_runs_disk_gb", "run_ttl_hours"):
            if not getattr(self, name) > 0:
                raise ValueError(f"BERTVIZ_{name.upper()} must be a positive number, got {getattr(self, name)}")
        if self.warn_class_examples < self.min_class_examples:
            raise ValueError(
                f"BERTVIZ_WARN_CLASS_EXAMPLES ({self.warn_class_examples}) must be at least "
                f"BERTVIZ_MIN_CLASS_EXAMPLES ({self.min_class_examples})"
            )
        if self.gpu_dtype not in {"auto", "bf16", "fp16", "fp32"}:
            raise ValueError(f"BERTVIZ_GPU_DTYPE must be auto, bf16, fp16 or fp32, got {self.gpu_dtype!r}")


def env_name(f) -> str:
    """The environment variable behind a Settings field, e.g. BERTVIZ_MAX_CHARS."""
    return "BERTVIZ_" + f.metadata.get("env", f.name.upper())



