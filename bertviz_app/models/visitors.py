"""Who owns what in public mode: each visitor's runs are theirs alone, within limits.

A visitor is an *owner*: the sha256 of a random 32-byte token that their browser keeps (the web
app's ``gr.BrowserState``; the JSON routes' ``X-Bertviz-Owner`` header). Only the hash is ever
stored: a run's ``run.json`` carries ``"owner": <hash>``, so a restarted server still knows whose
run is whose, and nothing on disk lets anyone act as its owner.

Every function takes the owner as an argument. ``owner=None`` means no ownership at all (local mode,
the CLI): everything is shared, as before. In public mode an owner is always a string; a request
without a valid token gets ``NOBODY``, which owns nothing. A run that is not the owner's answers
exactly as a run that does not exist (``ModelNotFoundError``, one message for both), so a visitor
cannot even learn that another visitor's run exists.

No gradio, no environment: the edges (ui/, the JSON routes) read the settings once into ``Limits``
and pass them down.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .catalog import RUN_INFO, load_run_info
from ..errors import InputError, LimitError, ModelNotFoundError

__all__ = [
    "COOKIE",
    "HEADER",
    "NOBODY",
    "FinetuneQueue",
    "Limits",
    "UploadCounter",
    "check_access",
    "check_model",
    "check_quota",
    "delete_owner_data",
    "delete_run",
    "hide_names",
    "is_run_name",
    "last_opened",
    "new_token",
    "owner_folder",
    "owner_hash",
    "owner_runs",
    "owner_tag",
    "run_owner",
    "sweep",
    "touch",
    "unknown_run",
    "valid_token",
    "visible",
]

HEADER = "X-Bertviz-Owner"  # the owner token of an API request (or the COOKIE the page sets)
COOKIE = "bertviz_owner"
NOBODY = "nobody"  # the owner of a public request without a valid token: owns no run (never a sha256 hex)
_TOKEN = re.compile(r"^[0-9a-f]{64}$")
_SALT = b"bertviz-owner-v1:"


# --------------------------------------------------------------------------- tokens and owners
def new_token() -> str:
    """A fresh owner token: 32 random bytes as 64 hex characters (never derived from anything guessable)."""
    return secrets.token_hex(32)


def valid_token(token: object) -> bool:
    return isinstance(token, str) and bool(_TOKEN.match(token))


def owner_hash(token: str | None) -> str:
    """The owner a token stands for (sha256, what is stored with a run); NOBODY for a missing or
    malformed token, so a bad token opens nothing rather than failing open."""
    if not valid_token(token):
        return NOBODY
    return hashlib.sha256(_SALT + token.encode("ascii")).hexdigest()


def owner_tag(owner: str) -> str:
    """A short prefix for the owner's run names (8 hex characters of the hash): two visitors choosing
    the same run name never collide, so a name tells nobody that another visitor used it."""
    return hashlib.sha256(b"tag:" + owner.encode()).hexdigest()[:8]


@dataclass(frozen=True)
class Limits:
    """The public mode's limits, built once from the settings at the edge (``from_settings``)."""

    runs_per_owner: int = 3
    runs_total: int = 30
    disk_bytes: int = 3 * 10**9
    ttl_s: float = 24 * 3600.0
    queue: int = 10  # fine-tunes that may wait for the running one
    uploads_per_hour: int = 20

    @classmethod
    def from_settings(cls, settings) -> Limits:
        return cls(runs_per_owner=settings.max_runs_per_visitor, runs_total=settings.max_runs_total,
                   disk_bytes=int(settings.max_runs_disk_gb * 10**9), ttl_s=settings.run_ttl_hours * 3600.0,
                   queue=settings.finetune_queue, uploads_per_hour=settings.max_uploads_per_hour)


# --------------------------------------------------------------------------- runs on disk
def is_run_name(name: str | None) -> bool:
    """True for a registered run name ``runs/<name>`` (however it is spaced or slashed)."""
    parts = [p for p in (name or "").strip().split("/") if p]
    return len(parts) > 1 and parts[0] == "runs"


def run_owner(path: Path) -> str | None:
    """The owner hash stored with the run at ``path`` (None: a run saved without one, e.g. by the CLI)."""
    info = load_run_info(path)
    owner = (info or {}).get("owner")
    return owner if isinstance(owner, str) else None


def _runs(runs_dir: Path) -> list[Path]:
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        return []
    return [p for p in runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
            and (p / "config.json").is_file()]


def last_opened(path: Path) -> float:
    """When the run was last opened (the mtime of its run.json, which ``touch`` moves; its folder's
    mtime stays, so the run lists keep their order)."""
    for p in (Path(path) / RUN_INFO, Path(path)):
        try:
            return p.stat().st_mtime
        except OSError:
            continue
    return 0.0


def touch(path: Path, now: float | None = None) -> None:
    """Mark the run as opened now (the sweeper removes runs not opened for ``Limits.ttl_s``)."""
    now = time.time() if now is None else now
    try:
        os.utime(Path(path) / RUN_INFO, (now, now))
    except OSError:
        pass


def owner_runs(runs_dir: Path, owner: str | None) -> list[Path]:
    """The owner's run folders, oldest first (``owner=None``: every run)."""
    found = [p for p in _runs(runs_dir) if owner is None or run_owner(p) == owner]
    return sorted(found, key=lambda p: p.stat().st_mtime)


def visible(models: Iterable[dict], owner: str | None, runs_dir: Path | None = None) -> list[dict]:
    """The entries of ``list_models()`` (or ``list_runs()``) this owner may see: every non-run model,
    and the runs it owns. ``owner=None``: all of them. An entry is a run when its name starts with
    ``runs/``; its owner is the entry's ``owner`` (run.json) or read from ``runs_dir``."""
    out = []
    for m in models:
        name = str(m.get("name", ""))
        if owner is None or not is_run_name(name):
            out.append(m)
            continue
        who = m.get("owner") if "owner" in m else (
            run_owner(Path(runs_dir) / name.split("/", 1)[1]) if runs_dir is not None else None)
        if who == owner:
            out.append(m)
    return out


def unknown_run(name: str, yours: Iterable[str] = ()) -> ModelNotFoundError:
    """The one answer for a run that does not exist and for another visitor's run."""
    yours = list(yours)
    listed = ", ".join(yours) if yours else "none yet (fine-tune one in the Fine-tune tab)"
    return ModelNotFoundError(
        f"No run {str(name).strip()[:80]!r} among your runs: it does not exist or was removed (runs not opened for "
        f"a while are removed). Your runs: {listed}. Runs belong to the browser that trained them; if this is "
        "yours, reload the page in that browser.")


def check_access(name: str | None, owner: str | None, runs_dir: Path) -> Path | None:
    """Raise ``unknown_run`` unless ``name`` is a run of ``owner`` (or not a run at all, or
    ``owner`` is None). Returns the run's folder for a run name, else None."""
    if owner is None or not is_run_name(name):
        return None
    parts = [p for p in (name or "").strip().split("/") if p]
    runs_dir = Path(runs_dir)
    path = runs_dir / parts[1] if len(parts) == 2 else None
    if path is None or not path.resolve().is_relative_to(runs_dir.resolve()) or run_owner(path) != owner \
            or not (path / "config.json").is_file():
        raise unknown_run(name, [f"runs/{p.name}" for p in owner_runs(runs_dir, owner)])
    return path


def check_model(name: str | None, default: str, owner: str | None, runs_dir: Path) -> None:
    """Public mode (``owner`` not None): a run another visitor owns answers as an unknown one, an owned
    run is marked as opened (the sweeper keeps it), and no model folders by path (except the
    operator's ``default``). Local mode (``owner`` None): nothing to check."""
    if owner is None:
        return
    name = (name or "").strip()
    path = check_access(name, owner, runs_dir)
    if path is not None:
        touch(path)
    looks_like_path = name.startswith((".", "/", "~", "\\")) or (os.sep in name and not is_run_name(name)
                                                                 and name.count("/") != 1)
    if name and name != default and looks_like_path:
        raise ModelNotFoundError("Opening model folders by path is turned off on this public app: use a "
                                 "model from the list, one of your runs, or a Hub id (owner/name).")


def owner_folder(owner: str | None) -> Path:
    """Where a visitor's downloads wait to be served (removed with the visitor's data)."""
    tag = owner_tag(owner) if owner else "local"
    return Path(tempfile.gettempdir()) / f"bertviz-visitor-{tag}"


def hide_names(message: str, hidden: Iterable[str]) -> str:
    """``message`` without the names in ``hidden`` (other visitors' runs listed by an error message
    of the registry, e.g. "Available: default, runs/a, runs/b")."""
    for name in sorted(set(hidden), key=len, reverse=True):
        message = re.sub(rf"(, )?(?<![\w./-]){re.escape(name)}(?![\w-]|\.[\w-])", "", message)
    return message.replace(": , ", ": ")


def _size(path: Path) -> int:
    total = 0
    for p in Path(path).rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def check_quota(runs_dir: Path, owner: str | None, limits: Limits, new_runs: int = 1) -> None:
    """Raise LimitError when ``new_runs`` more runs of ``owner`` would pass a limit (runs per visitor,
    runs in all, disk). Past the per-visitor limit the message names the visitor's oldest run
    (``LimitError.oldest``), to delete."""
    if owner is None:
        return
    mine = owner_runs(runs_dir, owner)
    oldest = f"runs/{mine[0].name}" if mine else None
    if len(mine) + new_runs > limits.runs_per_owner:
        need = len(mine) + new_runs - limits.runs_per_owner
        raise LimitError(
            f"You keep {len(mine)} run(s) and this fine-tune saves {new_runs}; a visitor may keep "
            f"{limits.runs_per_owner}. Delete {need} first: your oldest is {oldest} (choose it under Your runs and "
            "press Delete this run), or press Delete my data.", oldest=oldest)
    everyone = [p for p in _runs(runs_dir) if run_owner(p) is not None]
    if len(everyone) + new_runs > limits.runs_total:
        raise LimitError(
            f"The server holds {len(everyone)} visitors' runs, its limit is {limits.runs_total}: try again later "
            "(runs not opened for a while are removed)" + (f", or delete your oldest, {oldest}." if oldest else "."),
            oldest=oldest)
    used = sum(_size(p) for p in _runs(runs_dir))
    if used >= limits.disk_bytes:
        raise LimitError(
            f"The saved runs take {used / 1e9:.2f} GB of the {limits.disk_bytes / 1e9:.2f} GB allowed: try again "
            "later" + (f", or delete your oldest run, {oldest}." if oldest else "."), oldest=oldest)


def delete_run(runs_dir: Path, name: str | None, owner: str | None) -> str:
    """Remove the owner's run ``name``; another visitor's run answers as an unknown one."""
    if not is_run_name(name):
        raise InputError("Choose one of your runs (runs/<name>) to delete.")
    if owner is None:
        raise InputError("Runs are deleted by their owner, in public mode; locally, delete the folder under "
                         "models/runs/.")
    path = check_access(name, owner, runs_dir)
    shutil.rmtree(path, ignore_errors=True)
    return f"runs/{path.name}"


def delete_owner_data(runs_dir: Path, owner: str, folders: Iterable[Path] = ()) -> list[str]:
    """Remove every run of ``owner`` and the given per-owner ``folders`` (zips, outputs). Returns
    what was removed. Refuses ``owner=None`` (that would be every run). A visitor's evaluations go
    with ``service.delete_visitor_data``, which calls this."""
    if not owner or owner == NOBODY:
        raise InputError("There is no visitor to delete data for (this page has no owner token yet: reload it).")
    removed = []
    for path in owner_runs(runs_dir, owner):
        shutil.rmtree(path, ignore_errors=True)
        removed.append(f"runs/{path.name}")
    for folder in folders:
        if Path(folder).exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    return removed


def sweep(runs_dir: Path, ttl_s: float, now: float | None = None) -> list[str]:
    """Remove the visitors' runs (those with an owner) not opened for ``ttl_s`` seconds; runs saved
    without an owner (the operator's, from the CLI) stay. Returns the names removed."""
    now = time.time() if now is None else now
    removed = []
    for path in _runs(runs_dir):
        if run_owner(path) is not None and now - last_opened(path) > ttl_s:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(f"runs/{path.name}")
    return removed


# --------------------------------------------------------------------------- one fine-tune at a time
class FinetuneQueue:
    """One fine-tune runs at a time; the others wait in order, each visitor at most once.

    ``join(owner)`` refuses (LimitError) a visitor who already has one running or waiting (a second
    tab) and a full queue; ``position(ticket)`` is 0 when it is the ticket's turn; ``leave(ticket)``
    frees the place (always, in a ``finally``)."""

    def __init__(self, slots: int = 1, max_waiting: int = 10):
        self.slots, self.max_waiting = slots, max_waiting
        self._cond = threading.Condition()
        self._order: list[tuple[object, str]] = []  # (ticket, owner), running ones first

    def join(self, owner: str) -> object:
        with self._cond:
            if any(o == owner for _, o in self._order):
                raise LimitError("You already have a fine-tune running or waiting (another tab of this browser?): "
                                 "wait for it to finish, or cancel it there, then start again.")
            if len(self._order) >= self.slots + self.max_waiting:
                raise LimitError(f"{len(self._order) - self.slots} fine-tunes are already waiting, the most allowed: "
                                 "try again in a few minutes.")
            ticket = object()
            self._order.append((ticket, owner))
            return ticket

    def position(self, ticket) -> int:
        """0: this ticket may run now; k > 0: k fine-tunes run or wait before it."""
        with self._cond:
            idx = next((i for i, (t, _) in enumerate(self._order) if t is ticket), None)
            if idx is None:
                raise InputError("This fine-tune is no longer in the queue.")
            return max(0, idx - self.slots + 1)

    def wait(self, ticket, timeout: float) -> int:
        """Wait up to ``timeout`` s for the ticket's turn; returns its position then."""
        with self._cond:
            self._cond.wait_for(lambda: self.position(ticket) == 0, timeout=timeout)
        return self.position(ticket)

    def leave(self, ticket) -> None:
        with self._cond:
            self._order = [(t, o) for t, o in self._order if t is not ticket]
            self._cond.notify_all()

    def waiting(self, ticket, poll: float = 1.0, cancelled=lambda: False) -> Iterator[int]:
        """Yield the ticket's position while it waits (at most every ``poll`` s); returns on its turn
        or when ``cancelled()`` is true."""
        while not cancelled():
            pos = self.wait(ticket, poll)
            if pos == 0:
                return
            yield pos


class UploadCounter:
    """At most ``per_hour`` uploads per owner in any hour (sliding window)."""

    def __init__(self, per_hour: int):
        self.per_hour = per_hour
        self._lock = threading.Lock()
        self._seen: dict[str, deque] = {}

    def count(self, owner: str, now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._lock:
            times = self._seen.setdefault(owner, deque())
            while times and now - times[0] > 3600:
                times.popleft()
            if len(times) >= self.per_hour:
                wait = 3600 - (now - times[0])
                raise LimitError(f"You uploaded {len(times)} files in the last hour, the most allowed here: wait "
                                 f"{wait / 60:.0f} minutes, or use the app on your own machine (no limits there).")
            times.append(now)
            if len(self._seen) > 10_000:  # forget the quietest visitors
                for key in [k for k, v in self._seen.items() if not v or now - v[-1] > 3600]:
                    del self._seen[key]
