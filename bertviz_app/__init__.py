"""bertviz_app: see inside, and adapt, BERT text classifiers.

The one public facade, for a user's ``import bertviz_app as bv; bv.predict(...)``. The package is laid
out by domain (models, train, interpret, evaluate, service, ui, serve, cli: docs/layout.md), and its own
modules import each other's public names along the floors that ``tests/test_layering.py`` holds. The
facade's names are listed once, in ``__init__.pyi`` (``from .package.module import name as name``, one
line each), which type checkers read and ``lazy_loader`` turns into ``__all__`` and a module
``__getattr__``: each module is imported on first use of one of its names, so ``import bertviz_app``,
``bertviz-app --help`` and ``bertviz-app models`` never pay for torch, transformers or captum. The core
never imports gradio or plotly.
"""

import lazy_loader as lazy

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
