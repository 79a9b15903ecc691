"""Fine-tunes as jobs: ``FinetuneJob`` runs ``run_plan`` (a tagger's plan: ``run_tagger_plan``, a reader's:
``run_reader_plan``) in its own thread, to its end whoever watches it; ``FinetuneJobs`` holds each visitor's one
job, in a queue where one trains at a time.

A job is not its page: the web app's streaming event only *follows* a job (``events()``), so a page
that goes away (gradio cancels the event of a client that disconnects, and closes its generator)
leaves the run training; only ``cancel()`` (the page's Cancel button) stops it. Every event is kept,
so a page opened later (the visitor's other tab, or the same browser after a reload) follows the
same job from its start: curves and all."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from ...errors import CancelledError, LimitError
from ...models.visitors import FinetuneQueue
from .answer_plan import ReaderPlan, run_reader_plan
from .records import FinetunePlan, RunResult
from .runner import run_plan
from .tagger_plan import TaggerPlan, run_tagger_plan

__all__ = ["BUSY", "FinetuneJob", "FinetuneJobs"]

BUSY = ("You already have a fine-tune running or waiting (started in another tab, or on this page before it was "
        "closed or reloaded): one runs at a time per visitor. Reload this page to follow its progress in the "
        "Fine-tune tab; Cancel (in any tab of yours) stops it. Start again once it has finished: its run is then "
        "listed under Your runs.")


class FinetuneJob:
    """``run_plan`` in a worker thread, for an event loop that must stay responsive (the web
    app): ``start()``, then iterate ``events()`` (None every ``timeout`` s while nothing
    happens, a dict per event, ending after the run), then read ``results`` / ``error``.

    Any number of readers may iterate ``events()``, each from the first event (they are kept for
    the job's life). Given a ``queue`` and its ``ticket`` (``FinetuneQueue.join``), the job waits
    its turn first (``{"kind": "waiting", "position": k}`` events) and gives its place back at
    the end; ``on_end`` is called once it has ended, however."""

    def __init__(self, plan: FinetunePlan | TaggerPlan | ReaderPlan, cancel: threading.Event | None = None, *,
                 queue: FinetuneQueue | None = None, ticket: object = None, on_end: Callable[[], None] | None = None,
                 poll: float = 1.0):
        self.plan = plan
        self.cancel_event = cancel if cancel is not None else threading.Event()
        self.results: list = []  # RunResult, or TaggerRunResult / AnswerRunResult for a TaggerPlan / ReaderPlan
        self.error: BaseException | None = None
        self._queue, self._ticket, self._on_end, self._poll = queue, ticket, on_end, poll
        self._log: list[dict] = []
        self._cond = threading.Condition()
        self._ended = False
        self._thread: threading.Thread | None = None

    def start(self) -> FinetuneJob:
        self._thread = threading.Thread(target=self._work, name="bertviz-finetune", daemon=True)
        self._thread.start()
        return self

    def _put(self, event: dict) -> None:
        with self._cond:
            self._log.append(event)
            self._cond.notify_all()

    def _work(self) -> None:
        try:
            if self._queue is not None and self._ticket is not None:
                for pos in self._queue.waiting(self._ticket, poll=self._poll, cancelled=self.cancel_event.is_set):
                    self._put({"kind": "waiting", "position": pos})
                if self.cancel_event.is_set():  # while it waited for its turn
                    raise CancelledError("Cancelled before training started: nothing was saved.")
            run = (run_tagger_plan if isinstance(self.plan, TaggerPlan) else  # a tagger's, a reader's or a classifier's
                   run_reader_plan if isinstance(self.plan, ReaderPlan) else run_plan)
            self.results = run(self.plan, progress=self._put, cancel=self.cancel_event)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the job
            self.error = exc
        finally:
            if self._queue is not None and self._ticket is not None:
                self._queue.leave(self._ticket)
            with self._cond:
                self._ended = True
                self._cond.notify_all()
            if self._on_end is not None:
                self._on_end()

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def running(self) -> bool:
        """Started and not ended (waiting for its turn counts as running)."""
        with self._cond:
            return self._thread is not None and not self._ended

    def events(self, timeout: float = 0.2) -> Iterator[dict | None]:
        """Every event of the job from its first, then each new one as it comes (None after ``timeout``
        s without one); ends once the job has ended and its events are read."""
        seen = 0
        while True:
            with self._cond:
                if seen >= len(self._log) and not self._ended:
                    self._cond.wait(timeout)
                if seen < len(self._log):
                    event = self._log[seen]
                    seen += 1
                elif self._ended:
                    return
                else:
                    event = None
            yield event

    def wait(self, timeout: float | None = None) -> list[RunResult]:
        """Block until the run ends; re-raise its error (a cancel with runs saved is not one)."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.results


class FinetuneJobs:
    """Each visitor's fine-tune as a job (``owner``: the visitor's owner hash; one key for the single
    visitor of a local app): one at a time per visitor (a second ``submit`` while theirs is queued
    or running is refused with ``BUSY``), one training at a time in all (``slots``), at most
    ``max_waiting`` waiting (``FinetuneQueue``, which refuses past it). A job ends on its own or by
    ``cancel``; who follows it does not matter."""

    def __init__(self, slots: int = 1, max_waiting: int = 10, poll: float = 1.0):
        self.queue = FinetuneQueue(slots=slots, max_waiting=max_waiting)
        self._jobs: dict[str, FinetuneJob] = {}
        self._lock = threading.Lock()
        self._poll = poll

    def submit(self, owner: str, plan: FinetunePlan | TaggerPlan | ReaderPlan,
               cancel: threading.Event | None = None) -> FinetuneJob:
        """Start ``plan`` as ``owner``'s job (it waits for its turn in its own thread); LimitError when
        ``owner`` has one queued or running (``BUSY``) or the queue is full."""
        with self._lock:
            self.check(owner)
            ticket = self.queue.join(owner)
            job = FinetuneJob(plan, cancel=cancel, queue=self.queue, ticket=ticket, poll=self._poll,
                              on_end=lambda: self._forget(owner, job))
            self._jobs[owner] = job
            return job.start()

    def check(self, owner: str) -> None:
        """LimitError (``BUSY``) while ``owner`` has a fine-tune queued or running."""
        if self.current(owner) is not None:
            raise LimitError(BUSY)

    def current(self, owner: str) -> FinetuneJob | None:
        """``owner``'s job while it is queued or running; None once it has ended (its runs are saved)."""
        job = self._jobs.get(owner)
        return job if job is not None and job.running else None

    def cancel(self, owner: str) -> bool:
        """Ask ``owner``'s job to stop (it saves the best weights so far); False when none runs."""
        job = self.current(owner)
        if job is None:
            return False
        job.cancel()
        return True

    def _forget(self, owner: str, job: FinetuneJob) -> None:
        with self._lock:
            if self._jobs.get(owner) is job:
                del self._jobs[owner]
