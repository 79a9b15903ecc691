"""Batch work on a Ray cluster (issue 34): ``explain_csv``, ``predict_csv`` and ``evaluate_file`` take
``engine=RayEngine(...)`` and send their model work to a pool of Ray actors; everything else (reading the
file, the column checks, the metrics, writing the output) stays in this process, unchanged.

    from bertviz_app.service.ray_engine import RayEngine
    explain_csv(lm, "reviews.csv", "out.csv", engine=RayEngine(workers=2))          # a local Ray
    evaluate_file(lm, "reviews.csv", engine=RayEngine(address="auto", workers=8))    # a running cluster

How a job runs: the caller splits its rows into chunks exactly as its single-process path does (the
same rows together, so the same computation); the chunks become a Ray Dataset (``from_items``, one
block per chunk) that ``map_batches`` sends through ``ChunkWorker``, an actor class that loads the
model once per actor from its folder (``lm.path``: every node must see that path) and applies the
caller's per-chunk function (``batch_explain.explain_chunk``, ``evaluation.predict_chunk``...). The
pool is ``ActorPoolStrategy(size=workers)``, each actor holding ``cpus_per_worker`` CPUs (and its torch
threads set to that many: Ray sets OMP's threads to an actor's CPUs, torch is told the same) and
``gpus_per_worker`` GPUs (then the model goes on the actor's GPU). Results come back as they finish,
each tagged with its chunk's number; the caller puts them back in row order, so the file written is
the single-process path's. A chunk's result that arrives twice (a retried batch) is kept once; a
chunk that never arrives fails the job (no row is lost silently).

An actor that dies (its process killed, its node lost) is restarted (``max_retries`` times) and its
batch retried: Ray's ``max_restarts`` and ``max_task_retries`` on the actor class. ``cancel`` set (the
page's Cancel) or Ctrl-C: the dataset's execution is shut down (its actors end, their CPUs are free
again), CancelledError (or the KeyboardInterrupt) is raised; a cluster reached through ``address`` keeps
running.

``ray[data]`` is an optional extra (``pip install ".[ray]"``): ``ray`` is imported only here, inside the
calls that need it; without it ``RayEngine(...)`` can be built but running it raises EngineError saying
how to install it.
"""

from __future__ import annotations

import base64
import logging
import math
import pickle
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import BertvizError, CancelledError, InputError

__all__ = ["RayEngine", "ChunkWorker", "CancelFlag", "EngineError", "INSTALL_HINT", "ENGINES", "import_ray",
           "make_engine"]

log = logging.getLogger(__name__)

INSTALL_HINT = 'pip install ".[ray]"'  # or: pip install "ray[data]==2.60.0"
ENGINES = ("local", "ray")
LOCAL_OBJECT_STORE_MB = 200  # a Ray started here: its object store (chunks of text and their results are small)


class EngineError(BertvizError):
    """The batch engine asked for cannot run: Ray not installed, the cluster unreachable or too small."""


def import_ray():
    """``ray`` with ``ray.data``; EngineError saying how to install them when they are missing."""
    try:
        import ray
        import ray.data  # noqa: F401  (the extra installs both; ray alone lacks pyarrow)
    except ImportError as exc:
        raise EngineError(f"--engine ray needs Ray Data, which is not installed ({exc}). Install it with "
                          f"{INSTALL_HINT} (ray[data]==2.60.0), or leave out --engine ray to run in this "
                          "process.") from None
    return ray


def _restarts(n: int) -> dict:
    """The actors' fault tolerance: a dead actor is restarted, and its batch retried, up to ``n`` times."""
    return {"max_restarts": int(n), "max_task_retries": int(n)}


def _encode(obj) -> str:
    return base64.b64encode(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def _decode(text) -> object:
    return pickle.loads(base64.b64decode(str(text)))


class CancelFlag:
    """A job's stop sign, one small Ray actor (no CPU) per job: the driver sets it when the job is cancelled or
    interrupted, the workers read it between rows. (On Ray 2.60, Ray Data also kills an abandoned job's
    actors itself: with neither this flag nor the iterator's close, a cancelled test job's CPUs came back
    within a second. The flag keeps the stop from resting on when, and whether, Ray Data does that.)"""

    def __init__(self) -> None:
        self.value = False

    def set(self) -> None:
        self.value = True

    def is_set(self) -> bool:
        return self.value


class ChunkWorker:
    """One Ray actor: loads the model from ``model`` (a folder) once, then applies ``fn(lm, chunk,
    **kwargs)`` to every chunk of every batch it is given. Used by ``RayEngine`` through
    ``map_batches``; ``fn`` must be a module-level function (pickled by reference). With a ``flag``
    (``CancelFlag``), a chunk is skipped once it is set, and ``stoppable`` functions also get
    ``stop_if_cancelled`` (raises CancelledError: the chunk gives no result)."""

    def __init__(self, model: str, device: str, settings, fn: Callable, kwargs: dict, threads: int,
                 flag=None, stoppable: bool = False) -> None:
        import torch

        torch.set_num_threads(max(1, int(threads)))  # what Ray gave this actor, not the node's every core
        from ..models.registry import load_model

        self.lm = load_model(model, device=device, settings=settings)
        self.fn, self.kwargs, self.flag = fn, dict(kwargs), flag
        if stoppable:
            self.kwargs["stop_if_cancelled"] = self.stop_if_cancelled

    def cancelled(self) -> bool:
        if self.flag is None:
            return False
        import ray

        return bool(ray.get(self.flag.is_set.remote()))

    def stop_if_cancelled(self) -> None:
        if self.cancelled():
            raise CancelledError("cancelled")

    def __call__(self, batch: dict) -> dict:
        ids, results = [], []
        for i, payload in zip(batch["id"], batch["payload"]):
            try:
                self.stop_if_cancelled()
                results.append(_encode(self.fn(self.lm, _decode(payload), **self.kwargs)))
            except CancelledError:  # the driver has stopped listening: nothing to send
                continue
            ids.append(int(i))
        return {"id": ids, "result": results}


@dataclass(frozen=True)
class RayEngine:
    """Where and how wide a batch job runs on Ray.

    ``address``: None starts a Ray inside this process (all of this machine's cores; or uses the one
    already started with ``ray.init``), "auto" joins the cluster this machine belongs to (``ray start``),
    "ray://HOST:PORT" a remote cluster through Ray Client. ``workers``: actors in the pool, each loading the
    model once; ``cpus_per_worker`` and ``gpus_per_worker``: what each actor holds (GPUs: the model runs on
    the actor's GPU). ``max_retries``: how often an actor that dies is restarted and its batch retried.
    ``chunk_rows``: rows per chunk (the work one actor takes at a time) for evaluate and predict-csv;
    None: the single-process path's own chunks (1,024 rows for evaluate, 64 for predict-csv), so the same
    rows are batched together and the numbers match it exactly; smaller balances a small file better
    over many actors, at a per-chunk cost. explain-csv always uses its 16-row chunks."""

    address: str | None = None
    workers: int | None = None  # None: as many as the cluster's CPUs (or GPUs) hold
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    max_retries: int = 3
    chunk_rows: int | None = None
    object_store_mb: int = LOCAL_OBJECT_STORE_MB

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise InputError(f"workers (Ray actors) must be a whole number of at least 1, got {self.workers!r}.")
        for what, v, low in (("cpus_per_worker", self.cpus_per_worker, 0.0), ("gpus_per_worker",
                                                                             self.gpus_per_worker, 0.0)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < low:
                raise InputError(f"{what} must be a number of at least {low:g}, got {v!r}.")
        if self.cpus_per_worker == 0 and self.gpus_per_worker == 0:
            raise InputError("cpus_per_worker and gpus_per_worker are both 0: give each actor some CPU or GPU.")
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise InputError(f"max_retries must be a whole number of at least 0, got {self.max_retries!r}.")
        if self.chunk_rows is not None and (isinstance(self.chunk_rows, bool) or not isinstance(self.chunk_rows, int)
                                            or self.chunk_rows < 1):
            raise InputError(f"chunk_rows must be a whole number of at least 1, got {self.chunk_rows!r}.")
        if self.address is not None and not (self.address == "auto" or self.address.startswith("ray://")
                                             or ":" in self.address):
            raise InputError(f"address must be auto, ray://HOST:PORT or HOST:PORT, got {self.address!r}.")

    def describe(self) -> str:
        where = self.address or "a local Ray"
        gpus = f" + {self.gpus_per_worker:g} GPU" if self.gpus_per_worker else ""
        n = "one actor per CPU" if self.workers is None else f"{self.workers} actor{'s' if self.workers != 1 else ''}"
        return f"Ray ({where}), {n} x {self.cpus_per_worker:g} CPU{gpus}"

    # ------------------------------------------------------------------ the cluster
    def connect(self):
        """``ray``, initialised: the Ray this process already has, the cluster at ``address``, or a local one."""
        ray = import_ray()
        if not ray.is_initialized():
            # quiet: Ray's start-up notices and its workers' logs stay in its log folder (errors still raise here)
            kw = dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
            try:
                if self.address:
                    ray.init(address=self.address, **kw)
                else:
                    ray.init(object_store_memory=int(self.object_store_mb) * 2**20, **kw)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise EngineError(f"Could not reach a Ray cluster at {self.address or 'this machine'}: "
                                  f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}. Start one "
                                  "(ray start --head) or check the address (auto, ray://HOST:PORT).") from None
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # its per-run INFO lines and notices
        return ray

    def pool_size(self, ray) -> int:
        """``workers``, or as many actors as the cluster holds; EngineError for a pool the cluster can
        never hold (Ray would wait for it forever)."""
        have = ray.cluster_resources()
        cpus, gpus = float(have.get("CPU", 0)), float(have.get("GPU", 0))
        workers = self.workers
        if workers is None:
            fits = [have_n / per for have_n, per in ((cpus, self.cpus_per_worker), (gpus, self.gpus_per_worker))
                    if per]
            workers = max(1, int(min(fits) + 1e-9))
        need_c, need_g = workers * float(self.cpus_per_worker), workers * float(self.gpus_per_worker)
        if need_c > cpus + 1e-9 or need_g > gpus + 1e-9:
            raise EngineError(f"{workers} actor(s) x {self.cpus_per_worker:g} CPU"
                              + (f" + {self.gpus_per_worker:g} GPU" if self.gpus_per_worker else "")
                              + f" need {need_c:g} CPU" + (f" and {need_g:g} GPU" if need_g else "")
                              + f"; the cluster has {cpus:g} CPU and {gpus:g} GPU. Use fewer --workers or less per "
                              "worker, or add nodes.")
        return workers

    # ------------------------------------------------------------------ a job
    def map_chunks(self, lm, fn: Callable, chunks: Sequence, kwargs: dict | None = None, *,
                   on_result: Callable[[int, object], None] | None = None,
                   cancel: threading.Event | None = None, cancel_message: Callable[[int], str] | None = None,
                   stoppable: bool = False) -> list:
        """``fn(model, chunk, **kwargs)`` of every chunk on the actor pool, each actor holding ``lm``'s model
        loaded from its folder: the results in chunk order. ``on_result(i, result)`` as each one arrives
        (in the order they finish); ``cancel`` set: the job is stopped and CancelledError raised with
        ``cancel_message(chunks done)``. Cancelled, interrupted (Ctrl-C) or failed, the job's actors stop
        at their next chunk, or with ``stoppable`` (``fn`` takes ``stop_if_cancelled``, as
        ``explain_chunk``) at their next row."""
        if not chunks:
            return []
        ray = self.connect()
        workers = min(self.pool_size(ray), len(chunks))  # an actor without a chunk would only load the model
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # the caller's progress(done, total) is the progress shown
        ctx.execution_options.preserve_order = False  # results are put back in order here, by chunk number
        device = "cuda" if self.gpus_per_worker else "cpu"
        threads = max(1, int(self.cpus_per_worker))
        items = [{"id": i, "payload": _encode(c)} for i, c in enumerate(chunks)]
        flag = ray.remote(num_cpus=0)(CancelFlag).remote()
        with warnings.catch_warnings():
            # Ray 2.60 has no named parameter for an actor's restarts and calls the remote arguments that set
            # them deprecated (to go in 2.64; the extra pins 2.60): without them a dead actor would be
            # restarted without end, and a batch that kills its actor every time would never stop
            warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
            ds = ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
                ChunkWorker, batch_size=1, batch_format="numpy",
                fn_constructor_kwargs=dict(model=str(lm.path), device=device, settings=lm.settings, fn=fn,
                                           kwargs=kwargs or {}, threads=threads, flag=flag, stoppable=stoppable),
                compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=float(self.cpus_per_worker),
                num_gpus=float(self.gpus_per_worker) or None, **_restarts(self.max_retries))
        results: dict[int, object] = {}
        done_message = cancel_message or (lambda n: f"Cancelled after {n} of {len(chunks)} chunks.")
        # each block as soon as it is done (iter_rows' prefetch holds one back until the next is done)
        it = iter(ds.iter_batches(batch_size=None, prefetch_batches=0, batch_format="numpy"))
        try:
            for batch in it:
                for i, result in zip(batch["id"], batch["result"]):
                    i = int(i)
                    if i in results:  # a retried batch delivered twice: its rows are kept once
                        log.warning("chunk %d arrived twice (a retried batch); kept once", i)
                        continue
                    results[i] = _decode(result)
                    if on_result is not None:
                        on_result(i, results[i])
                    if cancel is not None and cancel.is_set():
                        raise CancelledError(done_message(len(results)))
        except BaseException:  # cancelled, Ctrl-C, a failure: the actors stop at their next row or chunk
            flag.set.remote()
            raise
        finally:
            close = getattr(it, "close", None)
            if close is not None:  # no more batches are sent; the actors end once their own are done
                close()
        ray.kill(flag)
        missing = [i for i in range(len(chunks)) if i not in results]
        if missing:
            raise EngineError(f"The Ray job returned {len(results)} of {len(chunks)} chunks (missing: "
                              f"{missing[:10]}); nothing was written. Run it again.")
        return [results[i] for i in range(len(chunks))]


def make_engine(engine: str | RayEngine | None = None, *, address: str | None = None, workers: int | None = None,
                cpus_per_worker: float = 1.0, gpus_per_worker: float = 0.0) -> RayEngine | None:
    """The engine of ``--engine``/``--address``/``--workers``...: None for "local" (this process) or a
    ``RayEngine``, checked before any work (Ray not installed: EngineError saying how to install it)."""
    if engine is None or engine == "local":
        if address is not None:
            raise InputError("--address is for --engine ray: add --engine ray, or leave out --address.")
        return None
    if isinstance(engine, RayEngine):
        return engine
    if engine != "ray":
        raise InputError(f"Unknown engine {engine!r}: choose one of {', '.join(ENGINES)}.")
    import_ray()
    return RayEngine(address=address, workers=workers, cpus_per_worker=float(cpus_per_worker),
                     gpus_per_worker=float(gpus_per_worker))
