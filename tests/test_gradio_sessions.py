"""New gradio sessions build component configs on first use (bertviz_app.ui.gradio_sessions): a queued API
call no longer pays for the whole page, and a session's configs, when read, are the ones gradio builds."""

from __future__ import annotations

import pytest

gr = pytest.importorskip("gradio")
from gradio import state_holder  # noqa: E402
from gradio.blocks import BlocksConfig  # noqa: E402

from bertviz_app.config import Settings  # noqa: E402
from bertviz_app.ui import build_app, gradio_sessions  # noqa: E402


@pytest.fixture(scope="module")
def demo(tiny_model_dir):
    return build_app(Settings(), str(tiny_model_dir))


@pytest.fixture()
def count_configs(monkeypatch):
    calls = []
    real = BlocksConfig.config_for_block

    def counted(_id, *args, **kwargs):
        calls.append(_id)
        return real(_id, *args, **kwargs)

    monkeypatch.setattr(BlocksConfig, "config_for_block", staticmethod(counted))
    return calls


def eager(demo) -> dict:
    """The configs gradio's own SessionState builds for a new session."""
    original = state_holder.SessionState.__new__(state_holder.SessionState)
    gradio_sessions.ORIGINAL_INIT(original, demo)
    return dict(original.config_values)


def test_a_new_session_builds_no_config_until_one_is_read(demo, count_configs, monkeypatch):
    monkeypatch.setattr(state_holder.SessionState, "__init__", gradio_sessions.ORIGINAL_INIT)
    state_holder.SessionState(demo)
    built_eagerly = len(count_configs)
    assert built_eagerly > 100  # the positive control: gradio's own init builds one per block of the page
    count_configs.clear()
    assert gradio_sessions.install() and gradio_sessions.installed()
    session = state_holder.SessionState(demo)
    assert count_configs == []
    some = next(iter(demo.blocks))
    session._update_value_in_config(some, "x")  # an update builds that one config only
    assert count_configs == [some]


def test_the_configs_read_are_the_ones_gradio_builds(demo, monkeypatch):
    monkeypatch.setattr(state_holder.SessionState, "__init__", gradio_sessions.lazy_init)
    session = state_holder.SessionState(demo)
    assert not session.is_closed and session.state_data == {}  # the rest of gradio's init ran
    want = eager(demo)
    assert list(session.components) == [c for c in want.values() if c]
    assert dict(session.config_values) == want and len(session.config_values) == len(want)
    key = next(iter(want))
    assert key in session.config_values and session.config_values.get(key) == want[key]
    assert -1 not in session.config_values and session.config_values.get(-1, "none") == "none"


def test_another_gradio_runs_unpatched(monkeypatch):
    monkeypatch.setattr(gr, "__version__", "99.0.0")
    monkeypatch.setattr(state_holder.SessionState, "__init__", gradio_sessions.ORIGINAL_INIT)
    assert gradio_sessions.install() is False and not gradio_sessions.installed()
