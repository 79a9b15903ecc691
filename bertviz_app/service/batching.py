"""Dynamic (micro-)batching of concurrent requests: many server threads each ask for one text,
one worker thread per model and kind of work answers them in shared, length-sorted batches.

Why: the web app runs each request in its own thread. Alone, each would pay a full forward
pass for one text and queue behind the model lock (``LoadedModel.run_lock``); gathered, 32
waiting texts cost about what 2-3 single ones do. ``predict_one`` and ``explain_one`` block
their caller until its own result is ready and return exactly that caller's result.

Isolation: every text is validated in the caller's thread before it is queued, so a bad text
raises its own ``InputError`` for its own caller and never reaches a batch. Should a whole batch
still fail (an out-of-memory error, say), each of its items is retried alone, so only the item
that fails gets the error.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..interpret.attribution import attribute, attribute_many
from ..interpret.attribution_options import check_args, steps_mode
from ..models.encoding import check_text
from ..models.inference import check_window, predict
from ..models.registry import LoadedModel
from ..results import Attribution, Prediction

__all__ = ["MicroBatcher", "predict_one", "predict_future", "explain_one", "MAX_BATCH", "MAX_WAIT_S"]

log = logging.getLogger(__name__)

# Most items in one gathered batch, and how long the worker waits for company after the first
# item arrives when the queue is otherwise empty (a lone request pays at most this much extra).
MAX_BATCH = 64
MAX_WAIT_S = 0.004
EXPLAIN_MAX_BATCH = 8  # attribute_many's own group size: more would not share passes
IDLE_EXIT_S = 30.0  # a worker with nothing to do for this long ends (a new one starts on demand)


@dataclass(frozen=True)
class _Item:
    key: Hashable  # items run together only when their keys (the call's options) are equal
    payload: Any
    future: Future


class MicroBatcher:
    """Gathers ``submit(key, payload)`` calls from many threads and runs them through
    ``run_batch(key, payloads) -> results`` (one result per payload, in order; a result may be an
    exception instance, which is raised for that caller only).

    The worker takes the first waiting item, then everything else already queued (up to
    ``max_batch``), waiting at most ``max_wait_s`` for more; items whose key differs from the
    first one's go back to the front for the next round. The worker thread is a daemon that is
    started on the first submit and ends after ``IDLE_EXIT_S`` without work."""

    def __init__(self, run_batch: Callable[[Hashable, list], list], max_batch: int = MAX_BATCH,
                 max_wait_s: float = MAX_WAIT_S, name: str = "batcher"):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._run_batch = run_batch
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.name = name
        self._queue: queue.Queue[_Item] = queue.Queue()
        self._held: list[_Item] = []  # items of another key, served first next round (worker thread only)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.batches = 0  # batches run so far (read by tests and the load bench)
        self.items = 0
        self._last_size = 1

    @property
    def waiting(self) -> int:
        """Calls queued and not yet taken into a batch (approximate while the worker runs)."""
        return self._queue.qsize()

    @property
    def worker(self) -> threading.Thread | None:
        """The worker thread, or None while none runs (it ends after IDLE_EXIT_S without work)."""
        return self._thread

    def submit(self, key: Hashable, payload: Any) -> Any:
        """Queue one item and block until its own result is ready (or raise its own error)."""
        return self.submit_future(key, payload).result()

    def submit_future(self, key: Hashable, payload: Any) -> Future:
        """Queue one item without waiting: its Future holds its own result or error (an event loop awaits it
        with ``asyncio.wrap_future`` instead of parking a thread on it)."""
        fut: Future = Future()
        with self._lock:  # with the worker's idle exit (_next_batch): an item never waits without a worker
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
            self._queue.put(_Item(key, payload, fut))
        return fut

    def _next_batch(self) -> list[_Item] | None:
        """The next batch, or None when nothing came for ``IDLE_EXIT_S`` (the worker then ends, so
        an unloaded model leaves no thread behind; the next submit starts a new one)."""
        pending = self._held
        self._held = []
        while not pending:
            try:
                pending.append(self._queue.get(timeout=IDLE_EXIT_S))  # blocks while idle
            except queue.Empty:
                with self._lock:
                    if self._queue.empty():
                        self._thread = None
                        return None
        # Wait for company only while requests are arriving together (the last batch had several):
        # a lone user pays no wait at all.
        deadline = time.monotonic() + (self.max_wait_s if self._last_size > 1 else 0.0)
        while len(pending) < self.max_batch * 4:
            try:
                timeout = deadline - time.monotonic()
                item = self._queue.get_nowait() if timeout <= 0 else self._queue.get(timeout=timeout)
            except queue.Empty:
                break
            pending.append(item)
            if sum(p.key == pending[0].key for p in pending) >= self.max_batch:
                break
        key = pending[0].key
        batch = [p for p in pending if p.key == key][: self.max_batch]
        chosen = {id(p) for p in batch}
        self._held = [p for p in pending if id(p) not in chosen]
        return batch

    def _loop(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self.batches += 1
            self.items += len(batch)
            self._last_size = len(batch)
            self._serve(batch)

    def _serve(self, batch: list[_Item]) -> None:
        try:
            results = self._run_batch(batch[0].key, [it.payload for it in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"{self.name}: {len(results)} results for {len(batch)} items")
        except BaseException as exc:  # noqa: BLE001 - isolate: retry one by one, so only the culprit fails
            if len(batch) == 1:
                batch[0].future.set_exception(exc)
                return
            log.warning("%s: a batch of %d failed (%s); serving its items one at a time", self.name, len(batch), exc)
            for it in batch:
                self._serve([it])
            return
        for it, res in zip(batch, results):
            if isinstance(res, BaseException):
                it.future.set_exception(res)
            else:
                it.future.set_result(res)


# --------------------------------------------------------------------------- per-model batchers
_BATCHERS: weakref.WeakKeyDictionary[LoadedModel, dict[str, MicroBatcher]] = weakref.WeakKeyDictionary()
_BATCHERS_LOCK = threading.Lock()


def _batcher(lm: LoadedModel, kind: str, make: Callable[[LoadedModel], MicroBatcher]) -> MicroBatcher:
    """One batcher per (model, kind): results never cross models."""
    with _BATCHERS_LOCK:
        per_model = _BATCHERS.setdefault(lm, {})
        if kind not in per_model:
            per_model[kind] = make(lm)
        return per_model[kind]


def batcher_stats(lm: LoadedModel) -> dict[str, tuple[int, int]]:
    """{kind: (batches, items)} so far for this model (for tests and the load bench)."""
    with _BATCHERS_LOCK:
        return {k: (b.batches, b.items) for k, b in _BATCHERS.get(lm, {}).items()}


def _checked(lm: LoadedModel, text: str, pair: str | None) -> tuple[str, str | None]:
    """The text, and the second text or None (a blank one means none), checked in the caller's thread
    (at most the model's settings' ``max_chars``)."""
    text = check_text(text, max_chars=lm.settings.max_chars)
    if pair is not None and not (isinstance(pair, str) and pair.strip()):
        pair = None
    return text, None if pair is None else check_text(pair, "Second text", lm.settings.max_chars)


def _make_predict(lm: LoadedModel) -> MicroBatcher:
    ref = weakref.ref(lm)  # the worker must not keep its model alive

    def run(key, payloads: list[tuple[str, str | None]]) -> list[Prediction]:
        model = ref()
        if model is None:
            raise RuntimeError("the model was unloaded")
        has_pair, window, stride, pool, calibrated = key
        texts = [t for t, _ in payloads]
        pairs = [p for _, p in payloads] if has_pair else None
        if window:
            return predict(model, texts, pairs, window=True, stride=stride, pool=pool, calibrated=calibrated)
        return predict(model, texts, pairs, calibrated=calibrated)

    return MicroBatcher(run, name=f"predict-batcher[{lm.name}]")


def predict_one(lm: LoadedModel, text: str, pair: str | None = None, window: bool = False, stride: int = 128,
                pool: str = "mean", calibrated: bool = True) -> Prediction:
    """``predict(lm, text, pair, window=..., stride=..., pool=..., calibrated=...)[0]``, batched with whatever other
    threads are predicting on the same model with the same options right now. Raises the same
    InputError as ``predict`` for a bad text or option, in the caller's thread, before queueing."""
    return predict_future(lm, text, pair, window, stride, pool, calibrated).result()


def predict_future(lm: LoadedModel, text: str, pair: str | None = None, window: bool = False, stride: int = 128,
                   pool: str = "mean", calibrated: bool = True) -> Future:
    """``predict_one`` without the wait: the checks run now (a bad text or option raises here), and the
    returned Future holds the Prediction once the batch it joined has run."""
    text, pair = _checked(lm, text, pair)
    window = bool(window)
    if window:
        check_window(lm, stride, pool)
    key = (pair is not None, window, stride if window else None, pool if window else None, bool(calibrated))
    return _batcher(lm, "predict", _make_predict).submit_future(key, (text, pair))


def _make_explain(lm: LoadedModel) -> MicroBatcher:
    ref = weakref.ref(lm)

    def run(key, payloads: list[tuple[str, str | None]]) -> list[Attribution]:
        model = ref()
        if model is None:
            raise RuntimeError("the model was unloaded")
        target, baseline, n_steps, output, tolerance = key
        if len(payloads) == 1:  # alone: through attribute's result cache
            text, pair = payloads[0]
            return [attribute(model, text, target=target, baseline=baseline, n_steps=n_steps, pair=pair, output=output,
                              tolerance=tolerance)]
        return attribute_many(model, [t for t, _ in payloads], target=target, baseline=baseline, n_steps=n_steps,
                              pairs=[p for _, p in payloads], output=output, tolerance=tolerance)

    return MicroBatcher(run, max_batch=EXPLAIN_MAX_BATCH, name=f"explain-batcher[{lm.name}]")


def explain_one(lm: LoadedModel, text: str, target: str | int | None = None, baseline: str = "pad",
                n_steps: int | None = None, pair: str | None = None, output: str = "prob",
                tolerance: float | None = None) -> Attribution:
    """``attribute(...)`` batched with concurrent explanations of the same model whose arguments
    match (target, baseline, n_steps, output, tolerance): they share attribute_many's passes.
    Steps as for ``attribute`` (default: adaptive at ``DEFAULT_TOLERANCE``).
    Arguments are checked in the caller's thread first, so a bad one fails only its own call."""
    n_steps, tolerance = steps_mode(n_steps, tolerance)
    text, pair = _checked(lm, text, pair)
    check_args(baseline, n_steps, output, tolerance, max_n_steps=lm.settings.max_n_steps)
    lm.label_index(target)  # an unknown class fails here, for this caller only
    key = (target, baseline, n_steps, output, tolerance)
    return _batcher(lm, "explain", _make_explain).submit(key, (text, pair))
