"""Long work run in a thread while a generator handler streams updates (``stream_work``), the
per-session cancel handle (``CancelFlag``) and Analyze's progress and time left (``AnalyzeProgress``)."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any

import bertviz_app as core

from .analysis import PATH_STEPS


class CancelFlag:
    """Per-session cancel handle kept in ``gr.State(CancelFlag())``. Gradio deep-copies a State's
    initial value once per session, so each session gets its own fresh flag (a threading.Event
    cannot be deep-copied; a callable initial value would add an API endpoint)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __deepcopy__(self, memo):
        return CancelFlag()

    def arm(self) -> threading.Event:
        """A fresh event for the next run (an earlier run keeps its own, already set if cancelled)."""
        self.event = threading.Event()
        return self.event


class AnalyzeProgress:
    """How far one Analyze is and about how long it has left, for the Analyze button and the status
    line beside it (gradio's own progress bar sits on the outputs, below the fold for a long text).

    Fed from the worker thread by the analysis' own step callbacks (``step``: the ``progress`` of
    ``analyze_fast``/``analyze_ig``) and ``ig_done``; read by the handler (``label``, ``status``).
    The time left is counted in this text's own forward pass (``core.attention``, timed between
    the "Reading attention" and "[CLS] lens" steps): a gradient evaluation of Integrated Gradients
    costs about ``EVAL_PASSES`` passes, a [CLS] path step ``PATH_SHARE`` of an evaluation (its
    passes start part-way up the model). Once the Integrated Gradients are done, their own time
    per evaluation replaces the guess, so the [CLS] path (most of a long text's wait) is estimated
    from this machine's measured speed. Measured on the default model, 2 busy cores: 512 tokens:
    a pass 0.41 s, 13 evaluations 6.3 s, the path (7 depths x 20 steps) 33.6 s; 134 tokens:
    0.042 s, 41 evaluations 4.8 s, path 7.9 s.

    One tracker follows the whole Analyze event (the quick part, then Integrated Gradients).
    ``clock``: seconds (``time.monotonic``; a test passes its own)."""

    EVAL_PASSES = 2.0  # one gradient evaluation ~ forward + backward: 1.2-2.8 forward passes (measured)
    AUTO_EVALS = 20  # "choose the steps automatically": 13 evaluations at first, more where the path bends
    FAITH_PASSES = 3.0  # faithfulness: ten masked copies in one batch
    PATH_SHARE = 0.5  # a [CLS] path step costs about half an Integrated Gradients evaluation (0.48-0.50)
    IG_PHASES = ("Starting Integrated Gradients", "Integrated Gradients", "Faithfulness",
                 "[CLS] path through the layers")
    SKIP_HINT = ("Tick **Skip Integrated Gradients** for the prediction and attention alone: Integrated Gradients "
                 "on a long text take up to a minute.")

    def __init__(self, n_layers: int = 12, n_steps: int = 50, auto: bool = True, skip_ig: bool = False,
                 clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or time.monotonic
        self.n_layers, self.skip_ig = int(n_layers), bool(skip_ig)
        self.evals = self.AUTO_EVALS if auto else int(n_steps)
        self.t0 = self.clock()
        self.phase, self.phase_t0 = "Loading the model", self.t0
        self.attention_t0: float | None = None
        self.t_pass: float | None = None  # one forward pass of this text (s)
        self.t_eval: float | None = None  # one gradient evaluation, once Integrated Gradients are done (s)
        self.shown = 0.0  # the fraction shown so far (it never goes back)
        self.lock = threading.Lock()

    # ------------------------------------------------------------ fed by the analysis (worker thread)
    def step(self, fraction: float, desc: str) -> None:
        now = self.clock()
        with self.lock:
            if desc == "Reading attention":
                self.attention_t0 = now
            elif desc == "[CLS] lens" and self.attention_t0 is not None:
                self.t_pass = max(now - self.attention_t0, 1e-4)
            self.phase, self.phase_t0 = desc, now

    def ig_done(self, attr: core.Attribution) -> None:
        now = self.clock()
        with self.lock:
            took = now - self.phase_t0  # the "Integrated Gradients" phase began with analyze_ig's step
            if attr.n_steps > 0 and took > 0:
                self.t_eval = took / attr.n_steps

    # ------------------------------------------------------------ estimates
    def _plan(self) -> list[tuple[str, float]] | None:
        """(phase, estimated seconds) of every phase from the [CLS] lens on; None before any timing."""
        t_pass = self.t_pass or (self.t_eval / self.EVAL_PASSES if self.t_eval else None)
        if t_pass is None:
            return None
        t_eval = self.t_eval or self.EVAL_PASSES * t_pass
        plan = [("[CLS] lens", t_pass)]
        if not self.skip_ig:
            plan += [(self.IG_PHASES[0], 0.0), (self.IG_PHASES[1], self.evals * self.EVAL_PASSES * t_pass),
                     (self.IG_PHASES[2], self.FAITH_PASSES * t_pass),
                     (self.IG_PHASES[3], (self.n_layers + 1) * PATH_STEPS * self.PATH_SHARE * t_eval)]
        return plan

    def left(self) -> float | None:
        """Seconds left (an estimate), or None while nothing has been timed yet."""
        with self.lock:
            plan = self._plan()
            if plan is None:
                return None
            names = [n for n, _ in plan]
            if self.phase not in names:  # still loading, predicting or reading attention
                return sum(sec for _, sec in plan)
            i = names.index(self.phase)
            spent = self.clock() - self.phase_t0
            current = max(plan[i][1] - spent, 0.15 * spent)  # a phase past its estimate: about 85% done
            return current + sum(sec for _, sec in plan[i + 1:])

    def fraction(self) -> float:
        left = self.left()
        spent = self.clock() - self.t0
        now = 0.02 if left is None else spent / max(spent + left, 1e-9)
        self.shown = min(max(self.shown, now), 0.99)
        return self.shown

    # ------------------------------------------------------------ shown
    @staticmethod
    def duration(seconds: float) -> str:
        if seconds < 1.5:
            return "about a second"
        if seconds < 90:
            return f"about {round(seconds):d} s"
        return f"about {round(seconds / 60):d} min"

    def label(self) -> str:
        """The Analyze button's text while it runs: 'Analyzing… 40% · about 12 s left'."""
        left = self.left()
        pct = f"{self.fraction():.0%}"
        return f"Analyzing\u2026 {pct}" + ("" if left is None else f" \u00b7 {self.duration(left)} left")

    def status(self) -> str:
        """The line beside the button: what runs now, and the skip hint unless IG is skipped."""
        with self.lock:
            phase = self.phase
        ready = "; the prediction and attention are ready" if phase in self.IG_PHASES else ""
        spent = round(self.clock() - self.t0)
        return (f"**{phase}\u2026** {spent:d} s so far{ready}." + ("" if self.skip_ig else " " + self.SKIP_HINT))


UPDATE_EVERY = 0.5  # seconds between two progress updates of a streamed handler


def stream_work(work: Callable[[], Any], update: Callable[[], dict], on_abandon: Callable[[], Any] | None = None):
    """For a generator handler: run ``work()`` in a thread, yield ``update()`` at once and every
    ``UPDATE_EVERY`` seconds while it runs, and return its result (``out = yield from ...``) or
    raise its error. ``work`` runs in the event's context (``contextvars``), so the visitor behind the
    event is known there as in the handler (public mode). If the page goes away (the generator is
    closed), ``on_abandon()`` is called (e.g. to cancel the work) and the work is waited for, so the
    event's concurrency slot stays taken as long as the model is busy."""
    box: dict = {}
    context = contextvars.copy_context()  # the event's gradio context (its request: who the visitor is)

    def run():
        try:
            box["out"] = context.run(work)
        except BaseException as exc:  # noqa: BLE001 - raised again in the handler's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="analyze", daemon=True)
    worker.start()
    try:
        yield update()
        while True:
            worker.join(UPDATE_EVERY)
            if not worker.is_alive():
                break
            yield update()
    finally:
        if worker.is_alive() and on_abandon is not None:
            on_abandon()
        worker.join()
    if "error" in box:
        raise box["error"]
    return box["out"]
