"""Time left from the measured recent rate: the one rule behind the default model's build ETA and a
fine-tune's ETA.

No ETA ("measuring...") until the work has been timed over at least ``min_units`` units and
``min_seconds`` seconds; then the time left is the units left at the rate of the last ``window``
seconds. A rate averaged from the start lags a machine whose load changes (the build said 7 min
42 s at 19 s and needed 9 min 52 s; a fine-tune said 8.2 min at step 60 and needed about 10): the
windowed rate follows the load within one window. The window is two minutes: a reduced build replayed
on a shared 2-core CPU (steps of 5 to 10 s) erred by 34% on average with a 60 s window, 28% with
120 s and 23% with 180 s (the average since the start: 16%, that run's load only fluctuated; it
lags a lasting change, which is what the window is for), so a shorter window chases noise; two
minutes is still a fraction of a build or a typical fine-tune. The clock is an argument, so tests
fake it.

Three things are not units at that rate, and each made the ETAs of issue 35 wrong (a fine-tune said
4.3 min at 10% when 2.4 remained, a build 2 min 09 s at 70% and finished 73 s later): the first
units (``skip_units``: a trainer's first step is the longest batch plus the warm-up of its kernels
and allocator, several times a later step) are left out of the rate; pauses between units
(``pause``: an evaluation during training) are timed apart, left out of the rate and counted by
themselves (``left(total, pauses=...)``: evaluations still to come and the evaluation after training
at their measured length); and the work after the last unit (the final evaluation and the save) is
the caller's to state, in pauses or in units (``after_units``).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["RateEta", "MEASURING"]

MEASURING = "measuring..."  # what a page or a terminal says while there is no ETA yet


class RateEta:
    """Feed ``update(done)`` as work is done (steps, examples...); ``left(total)`` is the seconds
    left for ``total`` units (None while measuring); ``rate`` the recent units per second.

    ``skip_units``: the first units are warm-up, timed out of the rate (the rate starts at the first
    update with at least that many done). ``pause()`` after something that is not a unit (an
    evaluation between steps) takes the time since the last update out of the rate and keeps it as a
    pause; ``left(total, pauses=k, after_units=u)`` adds k pauses of their mean length and u units
    of work after the last one."""

    def __init__(self, *, min_units: float = 10, min_seconds: float = 20.0, window: float = 120.0,
                 skip_units: float = 0, clock: Callable[[], float] = time.monotonic):
        if window <= 0 or min_seconds < 0 or min_units < 0 or skip_units < 0:
            raise ValueError("window must be > 0; min_units, min_seconds and skip_units >= 0")
        self.min_units, self.min_seconds, self.window, self.clock = min_units, min_seconds, window, clock
        self.skip_units = skip_units
        self._first: tuple[float, float] | None = None  # (work time, done) of the first update past the skip
        self._samples: deque[tuple[float, float]] = deque()  # (work time, done), spanning at least the window
        self._last: float | None = None  # clock time of the latest update or pause
        self._paused = 0.0  # seconds of pauses so far: work time = clock time - this
        self._pauses: list[float] = []

    def update(self, done: float, now: float | None = None) -> None:
        """Record that ``done`` units are done now (a count from the start, not an increment)."""
        now = self.clock() if now is None else now
        self._last = now
        if done < self.skip_units:
            return
        t = now - self._paused
        if self._first is None:
            self._first = (t, float(done))
        self._samples.append((t, float(done)))
        while len(self._samples) > 2 and self._samples[1][0] <= t - self.window:
            self._samples.popleft()  # keep one sample at or before the window's start

    def pause(self, now: float | None = None) -> float:
        """The time since the last update was not work on units (an evaluation): keep it out of the
        rate and count it as a pause. Returns its length in seconds."""
        now = self.clock() if now is None else now
        seconds = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        if self._first is not None:  # a pause before the rate's start is already out of it
            self._paused += seconds
        self._pauses.append(seconds)
        return seconds

    @property
    def mean_pause(self) -> float | None:
        """Mean seconds of the pauses so far (None: none yet)."""
        return sum(self._pauses) / len(self._pauses) if self._pauses else None

    @property
    def measured(self) -> bool:
        """True once the work was timed over ``min_units`` units and ``min_seconds`` seconds."""
        if self._first is None:
            return False
        t, d = self._samples[-1]
        return d - self._first[1] >= self.min_units and t - self._first[0] >= self.min_seconds and t > self._first[0]

    @property
    def rate(self) -> float | None:
        """Units per second over the last window (None while measuring)."""
        if not self.measured:
            return None
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 and d1 > d0 else None

    def left(self, total: float, pauses: float = 0.0, after_units: float = 0.0) -> float | None:
        """Seconds left until ``total`` units are done, at the recent rate, then ``pauses`` pauses of
        the mean length measured (none measured: not counted) and ``after_units`` more units' worth
        of work (None while measuring)."""
        rate = self.rate
        if rate is None:
            return None
        units = max(0.0, float(total) - self._samples[-1][1]) + max(0.0, float(after_units))
        return units / rate + max(0.0, float(pauses)) * (self.mean_pause or 0.0)
