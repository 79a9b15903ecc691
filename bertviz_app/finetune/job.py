"""``FinetuneJob``: ``run_plan`` in a worker thread, for an event loop that must stay responsive."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from .records import FinetunePlan, RunResult
from .runner import run_plan

__all__ = ["FinetuneJob"]


class FinetuneJob:
    """``run_plan`` in a worker thread, for an event loop that must stay responsive (the web
    app): ``start()``, then iterate ``events()`` (None every ``timeout`` s while nothing
    happens, a dict per event, ending after the run), then read ``results`` / ``error``."""

    def __init__(self, plan: FinetunePlan, cancel: threading.Event | None = None):
        self.plan = plan
        self.cancel_event = cancel if cancel is not None else threading.Event()
        self.results: list[RunResult] = []
        self.error: BaseException | None = None
        self._events: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self) -> FinetuneJob:
        self._thread = threading.Thread(target=self._work, name="bertviz-finetune", daemon=True)
        self._thread.start()
        return self

    def _work(self) -> None:
        try:
            self.results = run_plan(self.plan, progress=self._events.put, cancel=self.cancel_event)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever reads the job
            self.error = exc
        finally:
            self._events.put({"kind": "done"})

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def events(self, timeout: float = 0.2) -> Iterator[dict | None]:
        while True:
            try:
                event = self._events.get(timeout=timeout)
            except queue.Empty:
                yield None
                continue
            if event.get("kind") == "done":
                return
            yield event

    def wait(self, timeout: float | None = None) -> list[RunResult]:
        """Block until the run ends; re-raise its error (a cancel with runs saved is not one)."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.results
