"""bertviz_app: see inside, and adapt, BERT text classifiers.

The one public facade: the UI and the CLI import from here only. Its names are listed once, in
``__init__.pyi`` (``from .module import name as name``, one line each), which type checkers read
and ``lazy_loader`` turns into ``__all__`` and a module ``__getattr__``: each module is imported on
first use of one of its names, so ``import bertviz_app``, ``bertviz-app --help`` and ``bertviz-app
models`` never pay for torch, transformers or captum. The core never imports gradio or plotly.
"""

import lazy_loader as lazy

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = lazy.attach_stub(__name__, __file__)
