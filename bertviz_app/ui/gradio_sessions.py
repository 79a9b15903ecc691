"""Sessions that cost nothing until used: gradio builds every component's config for each new session.

gradio 6.31's ``SessionState.__init__`` computes ``config_for_block`` for every block of the app (each a
``get_config`` with ``inspect.signature`` calls), on the event loop, for every new session. A page opens
one session, but an API call through the queue (``POST /gradio_api/call/predict``, which gradio_client
and the Hub's "Use via API" make) gets a fresh ``session_hash`` each time, so each call paid for the whole
page: on this app (~400 blocks) a py-spy profile of the served app under 8 concurrent queued /predict
calls put 79% of the event loop's time there, serializing the calls. Those configs are only read when a
session's components are listed (deep links) or one of them is updated; ``LazyConfigs`` computes each
on first use instead, with the same values.

``install()`` is called by ``ui.mount``; it patches the one class, and only on the gradio version it was
written for (``requirements.txt`` pins it), so a newer gradio runs unpatched (correct, only slower).
"""

from __future__ import annotations

import logging

import gradio
from gradio import state_holder

__all__ = ["GRADIO_VERSION", "ORIGINAL_INIT", "LazyConfigs", "install", "installed", "lazy_init"]

log = logging.getLogger("bertviz_app.ui")

GRADIO_VERSION = "6.31.0"  # the version whose SessionState.__init__ this replaces a part of
ORIGINAL_INIT = state_holder.SessionState.__init__


class LazyConfigs(dict):
    """``SessionState.config_values`` as gradio fills it (``{block id: config_for_block(...)}`` for the
    blocks both the session's config and the app hold), each entry computed when first read; listing it
    (``items``, ``values``, iteration, ``len``) computes the rest."""

    def __init__(self, blocks_config, ids):
        super().__init__()
        self._config, self._ids = blocks_config, tuple(ids)

    def _fill(self, key):
        value = self._config.config_for_block(key, [], self._config.blocks[key])
        dict.__setitem__(self, key, value)
        return value

    def _fill_all(self) -> None:
        for key in self._ids:
            if not dict.__contains__(self, key):
                self._fill(key)

    def __missing__(self, key):
        if key in self._ids:
            return self._fill(key)
        raise KeyError(key)

    def __contains__(self, key) -> bool:
        return dict.__contains__(self, key) or key in self._ids

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __iter__(self):
        self._fill_all()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill_all()
        return super().__len__()

    def keys(self):
        self._fill_all()
        return super().keys()

    def values(self):
        self._fill_all()
        return super().values()

    def items(self):
        self._fill_all()
        return super().items()


class _NoBlocks:
    """What gradio's ``SessionState.__init__`` reads of its Blocks, with no blocks to build configs for."""

    def __init__(self, blocks):
        self.default_config = blocks.default_config
        self.blocks = {}


def lazy_init(self, blocks) -> None:
    try:
        ORIGINAL_INIT(self, _NoBlocks(blocks))  # everything else as gradio sets it; the configs left out
    except AttributeError:  # gradio reads more of the Blocks than this was written for: as gradio does it
        ORIGINAL_INIT(self, blocks)
        return
    self.config_values = LazyConfigs(self.blocks_config, [k for k in self.blocks_config.blocks if k in blocks.blocks])


def install() -> bool:
    """Make new sessions build component configs on first use; True when installed (once is enough)."""
    if gradio.__version__ != GRADIO_VERSION:
        log.info("gradio %s: new sessions build every config up front (the patch is for %s)", gradio.__version__,
                 GRADIO_VERSION)
        return False
    state_holder.SessionState.__init__ = lazy_init
    return True


def installed() -> bool:
    return state_holder.SessionState.__init__ is lazy_init
