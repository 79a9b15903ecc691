"""Exceptions raised by the core. Each message says what to do; only the edges (ui/, cli/)
translate them (a ``gr.Error`` in the browser, one line on stderr and exit 2 in the CLI)."""

from __future__ import annotations

__all__ = [
    "BertvizError",
    "InputError",
    "ModelLoadError",
    "ModelNotFoundError",
    "DataError",
    "TrainingError",
    "CancelledError",
    "ResourceError",
    "LimitError",
]


class BertvizError(Exception):
    """Base class: every error the core raises on purpose. ``str(err)`` is safe to show a user."""


class InputError(BertvizError, ValueError):
    """A bad argument from the user: empty or huge text, unknown class name, bad n_steps..."""


class ModelNotFoundError(BertvizError, LookupError):
    """No model under that name, folder or Hub id."""


class ModelLoadError(BertvizError):
    """The model exists but cannot or must not be loaded (pickle weights, wrong architecture...)."""


class DataError(BertvizError, ValueError):
    """An uploaded data file cannot be used for training; the message lists what to fix."""


class TrainingError(BertvizError):
    """A training run failed; earlier models are untouched."""


class CancelledError(BertvizError):
    """The user cancelled a job."""


class ResourceError(BertvizError):
    """The machine ran out of memory for this request even after retrying smaller; the server goes on."""


class LimitError(BertvizError):
    """A visitor's request is past a limit of the public mode (runs kept, disk, one fine-tune at a
    time, uploads); the message says what to do. ``oldest``: the visitor's oldest run, offered for
    deletion when deleting it would make room (else None)."""

    def __init__(self, message: str, oldest: str | None = None):
        super().__init__(message)
        self.oldest = oldest
