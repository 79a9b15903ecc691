"""Command line front over the core: the only place that prints. One module per group of commands,
each with its commands' arguments (``register``) beside the commands; here, ``main`` and the parser:

    analyses   predict, explain (windows, --compare), explain-csv
    tagging    tag (a token classifier's entities)
    answering  answer (a question answering model's span of a context)
    internals  attention, summary
    models     models, build-default, finetune
    evaluate   evaluate, layers
    serve      serve
    common     what they share: texts from the arguments or stdin, one-line errors, JSON lines

    python -m bertviz_app predict "A gorgeous, moving film." --json
    python -m bertviz_app explain "A tedious, joyless slog." --target negative --json
    python -m bertviz_app explain "A tedious, joyless slog." --html why.html --out why.json
    python -m bertviz_app explain "A tedious, joyless slog." --method occlusion
    python -m bertviz_app explain "A tedious, joyless slog." --compare
    python -m bertviz_app evaluate reviews.csv --word not --json --out eval-run/
    python -m bertviz_app layers reviews.csv --json
    python -m bertviz_app tag "Ada Lovelace met Babbage in London." --model ./my-tagger --json
    python -m bertviz_app answer --question "Who met Babbage?" --context "Ada Lovelace met Babbage." --model ./my-qa

Errors print one line on stderr and exit with status 2; no traceback reaches the user
(set BERTVIZ_DEBUG=1 to see one). A reader that stops early (``| head -1``) is not an error:
the command stops quietly with status 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from ..config import Settings
from ..errors import BertvizError
from . import analyses, answering, evaluate, internals, models, serve, tagging
from .common import EXIT_ERROR, fail
from .internals import MEASURE_NAMES as MEASURE_NAMES  # re-exported: a test checks it against the core's

__all__ = ["main"]


def _quiet_stdout() -> None:
    """After a BrokenPipeError: point stdout at devnull, so the interpreter's final flush of what is
    still buffered does not fail again ("Exception ignored ... BrokenPipeError", status 120). The
    recipe of the Python docs' "Note on SIGPIPE"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (an in-process caller's stdout)
        pass


def build_parser(settings: Settings | None = None) -> argparse.ArgumentParser:
    """The parser; its defaults come from ``settings`` (``main`` reads them from the environment once)."""
    settings = settings or Settings()
    parser = argparse.ArgumentParser(prog="bertviz-app", description="See inside, and adapt, BERT text classifiers.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func, help: str, text: str | None = None):
        p = sub.add_parser(name, help=help, description=help)
        p.add_argument("--model", default=settings.default_model,
                       help="registered name, folder, or Hub id (default: %(default)s)")
        p.add_argument("--device", default=None, help="auto, cpu, cuda, cuda:N or mps (default: settings, auto)")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        if text == "many":
            p.add_argument("text", nargs="*", help="texts to classify; none or '-' reads one per line from stdin")
        elif text == "one":
            p.add_argument("text", nargs="*", help="the text ('-' or nothing: read it from stdin)")
        if text:
            p.add_argument("--pair", default=None, help="second text, for sentence-pair models")
        p.set_defaults(func=func)
        return p

    # in the order of `bertviz-app --help`'s list of commands
    analyses.register(add)  # predict, explain, explain-csv
    tagging.register(add)  # tag
    answering.register(add)  # answer
    internals.register(add)  # attention, summary
    models.register(add)  # models, build-default, finetune
    evaluate.register(add)  # evaluate, layers
    serve.register(add, settings)
    return parser


# Commands that never import torch/transformers (a subprocess test checks it): they start in a
# fraction of a second instead of the ~5 s of ML imports. `--help` exits while parsing, before any.
NO_MODEL_COMMANDS = (models.cmd_models,)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        settings = Settings.from_env()  # the one read of the environment's BERTVIZ_* settings
    except ValueError as exc:  # a bad BERTVIZ_* setting
        return fail(str(exc))
    args = build_parser(settings).parse_args(argv)
    args.settings = settings  # every command takes its settings from here
    if args.func not in NO_MODEL_COMMANDS:  # only the commands that load a model pay for transformers
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader gone by now fails here, inside the handlers, not at interpreter exit
        return code
    except BrokenPipeError:  # the reader stopped early (`| head -1`): it has what it wanted
        _quiet_stdout()
        return 0
    except BertvizError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return fail("interrupted")
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
    except Exception as exc:
        if settings.debug:
            traceback.print_exc()
        return fail(f"unexpected {type(exc).__name__}: {exc} (set BERTVIZ_DEBUG=1 for details)")
