"""Settings, read once from environment variables (documented in README "Settings").

Every limit the app enforces on untrusted input lives here with a safe default, so a Space
operator can change it without touching code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path

__all__ = ["Settings", "get_settings", "PROJECT_ROOT"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _env(name: str, default: str) -> str:
    return os.environ.get(f"BERTVIZ_{name}", default)


@dataclass(frozen=True)
class Settings:
    models_dir: Path = field(
        default_factory=lambda: Path(_env("MODELS_DIR", str(PROJECT_ROOT / "models"))),
        metadata={"help": "Folder holding registered models (default/, runs/<name>/)."},
    )
    default_model: str = field(
        default_factory=lambda: _env("MODEL", "default"),
        metadata={"help": "Model the app opens with: a registered name, a folder or a Hub id.", "env": "MODEL"},
    )
    device: str = field(
        default_factory=lambda: _env("DEVICE", "auto"),
        metadata={"help": "auto (cuda, then mps, then cpu), cpu, cuda, cuda:N or mps."},
    )
    gpu_dtype: str = field(
        default_factory=lambda: _env("GPU_DTYPE", "auto"),
        metadata={"help": "Inference dtype on CUDA: auto (bf16 if supported, else fp16), bf16, fp16, fp32."},
    )
    host: str = field(
        default_factory=lambda: _env("HOST", "127.0.0.1"),
        metadata={"help": "Address the app listens on: 127.0.0.1 (this machine only, the default: the app opens local "
                  "folders and fine-tunes on uploads) or 0.0.0.0 (every interface; the Docker image sets it)."},
    )
    port: int = field(default_factory=lambda: int(_env("PORT", "7860")), metadata={"help": "Port the app listens on."})
    cpu_int8: bool = field(
        default_factory=lambda: _env("CPU_INT8", "0").lower() in ("1", "true", "yes", "on"),
        metadata={"help": "Predict with int8 dynamically quantised Linear layers on a CPU (about 1.6x faster "
                  "on the 2-core bench machine, held-out accuracy 0.836 -> 0.826 on 1,000 reviews; attention maps and "
                  "attributions stay float32). Off by default."},
    )
    max_chars: int = field(
        default_factory=lambda: int(_env("MAX_CHARS", "20000")),
        metadata={"help": "Longest text accepted, in characters (longer is refused with a message)."},
    )
    max_batch_texts: int = field(
        default_factory=lambda: int(_env("MAX_BATCH_TEXTS", "10000")),
        metadata={"help": "Most texts one predict call accepts."},
    )
    max_n_steps: int = field(
        default_factory=lambda: int(_env("MAX_N_STEPS", "500")),
        metadata={"help": "Largest Integrated Gradients n_steps accepted."},
    )
    queue_size: int = field(
        default_factory=lambda: int(_env("QUEUE_SIZE", "256")),
        metadata={"help": "Requests that may wait in the web app's queue; beyond it a request is refused at "
                  "once with a 'busy, try again' message instead of waiting without end."},
    )
    allow_local_paths: bool = field(
        default_factory=lambda: _env("ALLOW_LOCAL_PATHS", "1").lower() not in ("0", "false", "no", "off"),
        metadata={"help": "Let the web app open model folders by path (off on public deployments: names "
                  "are then confined to models/ and Hub ids)."},
    )

    max_upload_mb: float = field(
        default_factory=lambda: float(_env("MAX_UPLOAD_MB", "50")),
        metadata={"help": "Largest training/validation file accepted, in megabytes (10**6 bytes)."},
    )
    max_rows: int = field(
        default_factory=lambda: int(_env("MAX_ROWS", "200000")),
        metadata={"help": "Most data rows a training/validation file may have."},
    )
    min_class_examples: int = field(
        default_factory=lambda: int(_env("MIN_CLASS_EXAMPLES", "2")),
        metadata={"help": "Fewest examples a class needs before training starts (2 lets a split keep one aside)."},
    )
    warn_class_examples: int = field(
        default_factory=lambda: int(_env("WARN_CLASS_EXAMPLES", "10")),
        metadata={"help": "Classes with fewer examples than this get a warning (too few to learn well)."},
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
                raise ValueError(f"{env_name(f)} must be a positive integer, got {value}")
        if not self.max_upload_mb > 0:
            raise ValueError(f"BERTVIZ_MAX_UPLOAD_MB must be a positive number, got {self.max_upload_mb}")
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


def get_settings() -> Settings:
    """Settings from the current environment (cheap; read anew so tests can monkeypatch env)."""
    return Settings()
