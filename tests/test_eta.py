"""The ETA rule (bertviz_app/eta.py) on a fake clock: "measuring..." until the rate is measured,
then the time left at the recent rate, following a change of speed."""

from __future__ import annotations

import pytest

from bertviz_app.eta import RateEta


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(eta: RateEta, clock: FakeClock, steps: int, seconds_per_step: float, start: int) -> int:
    for step in range(start + 1, start + steps + 1):
        clock.now += seconds_per_step
        eta.update(step)
    return start + steps


def test_no_eta_until_enough_units_and_seconds_are_timed():
    clock = FakeClock()
    eta = RateEta(min_units=10, min_seconds=20.0, window=60.0, clock=clock)
    assert eta.left(100) is None and eta.rate is None and not eta.measured  # nothing seen yet
    eta.update(0)
    done = run(eta, clock, 9, 5.0, 0)  # 45 s but only 9 steps
    assert eta.left(100) is None
    done = run(eta, clock, 1, 5.0, done)  # 10 steps in 50 s: measured
    assert eta.measured and eta.left(100) == pytest.approx(90 * 5.0)
    fast = RateEta(min_units=10, min_seconds=20.0, clock=clock)
    fast.update(0)
    run(fast, clock, 50, 0.1, 0)  # 50 steps but only 5 s
    assert fast.left(100) is None


def test_eta_follows_a_change_of_speed_within_one_window():
    clock = FakeClock()
    eta = RateEta(min_units=10, min_seconds=20.0, window=60.0, clock=clock)
    eta.update(0)
    done = run(eta, clock, 60, 1.0, 0)  # a quiet machine: 1 step a second
    assert eta.left(600) == pytest.approx(540.0)
    done = run(eta, clock, 10, 2.0, done)  # the machine gets busy: 2 s a step
    assert 540 * 1.0 < eta.left(600) < 530 * 2.0  # on its way
    done = run(eta, clock, 30, 2.0, done)  # a whole window at the new speed
    assert eta.rate == pytest.approx(0.5) and eta.left(600) == pytest.approx((600 - done) * 2.0)
    done = run(eta, clock, 120, 0.5, done)  # and quiet again, faster
    assert eta.left(600) == pytest.approx((600 - done) * 0.5)


def test_a_cumulative_average_would_lag_where_the_window_does_not():
    """The issue's case: fast first steps, then the CPU gets shared: the time left is that of the
    new speed, not the average since the start."""
    clock = FakeClock()
    eta = RateEta(clock=clock)
    eta.update(0)
    done = run(eta, clock, 100, 1.0, 0)
    done = run(eta, clock, 80, 1.6, done)  # 128 s (a window) at the slower speed
    assert eta.left(336) == pytest.approx((336 - done) * 1.6)
    average = (clock.now - 1000.0) / done
    assert eta.left(336) > (336 - done) * average * 1.2


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        RateEta(window=0)


def test_training_progress_events_carry_the_measured_eta(monkeypatch):
    """The training callback (the fine-tune's and the default build's progress) uses the rule."""
    from types import SimpleNamespace

    from bertviz_app.training import ProgressReporter

    clock, events = FakeClock(), []
    reporter = ProgressReporter(events.append, None, 0.0)
    reporter.steps = RateEta(min_units=10, min_seconds=20.0, window=60.0, clock=clock)
    state = SimpleNamespace(global_step=0, max_steps=200, epoch=0.0)

    def steps(n: int, seconds: float) -> None:
        for _ in range(n):
            clock.now += seconds
            state.global_step += 1
            reporter.on_step_end(None, state, SimpleNamespace(should_training_stop=False))
        reporter.on_log(None, state, None, logs={"loss": 0.5})

    reporter.on_step_end(None, state, SimpleNamespace(should_training_stop=False))  # the start
    steps(5, 1.0)
    assert events[-1]["eta"] is None and events[-1]["rate"] is None  # measuring
    steps(55, 1.0)
    assert events[-1]["eta"] == pytest.approx(140.0) and events[-1]["rate"] == pytest.approx(1.0)
    steps(40, 3.0)  # the CPU is shared now: a window at a third of the speed
    assert events[-1]["eta"] == pytest.approx(100 * 3.0)
