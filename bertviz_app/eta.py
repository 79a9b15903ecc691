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
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["RateEta", "MEASURING"]

MEASURING = "measuring..."  # what a page or a terminal says while there is no ETA yet


class RateEta:
    """Feed ``update(done)`` as work is done (steps, examples...); ``left(total)`` is the seconds
    left for ``total`` units (None while measuring); ``rate`` the recent units per second."""

    def __init__(self, *, min_units: float = 10, min_seconds: float = 20.0, window: float = 120.0,
                 clock: Callable[[], float] = time.monotonic):
        if window <= 0 or min_seconds < 0 or min_units < 0:
            raise ValueError("window must be > 0; min_units and min_seconds >= 0")
        self.min_units, self.min_seconds, self.window, self.clock = min_units, min_seconds, window, clock
        self._first: tuple[float, float] | None = None  # (time, done) of the first update
        self._samples: deque[tuple[float, float]] = deque()  # (time, done), spanning at least the window

    def update(self, done: float, now: float | None = None) -> None:
        """Record that ``done`` units are done now (a count from the start, not an increment)."""
        now = self.clock() if now is None else now
        if self._first is None:
            self._first = (now, float(done))
        self._samples.append((now, float(done)))
        while len(self._samples) > 2 and self._samples[1][0] <= now - self.window:
            self._samples.popleft()  # keep one sample at or before the window's start

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

    def left(self, total: float) -> float | None:
        """Seconds left until ``total`` units are done, at the recent rate (None while measuring)."""
        rate = self.rate
        if rate is None:
            return None
        return max(0.0, (float(total) - self._samples[-1][1]) / rate)
