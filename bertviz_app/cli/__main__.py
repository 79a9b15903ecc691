"""``python -m bertviz_app.cli``, as before the command line became a package (``python -m bertviz_app`` is the
documented way)."""

import sys

from . import main

sys.exit(main())
