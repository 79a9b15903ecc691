"""What the command modules share: reading the texts, one-line errors, JSON lines, the model of
``--model``/``--device``, Integrated Gradients' steps."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager

from ..errors import DataError
from ..results import FIXED_N_STEPS

EXIT_ERROR = 2


def print_json(obj) -> None:
    """One JSON object per line on stdout (the --json contract)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def read_texts(args) -> list[str]:
    """Texts from the arguments, or one per line of standard input when none (or "-") is given."""
    if args.text and args.text != ["-"]:
        return args.text
    if sys.stdin is None or sys.stdin.isatty():
        raise SystemExit(fail("no text given: pass it as an argument or pipe one text per line on stdin"))
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    return [line for line in lines if line.strip()]


def one_text(args) -> str:
    """The one text of a command that explains a single text (explain, attention)."""
    texts = read_texts(args)
    if len(texts) != 1:
        raise SystemExit(fail(f"this command takes one text, got {len(texts)}"))
    return texts[0]


@contextmanager
def file_run(tty: bool):
    """Around a command's run over a file that reports progress on stderr: a DataError's several problems joined
    into one line (the one-line error contract), and the progress line ended (``tty``) however the run ends."""
    try:
        yield
    except DataError as exc:
        raise DataError(" ".join(str(exc).split())) from None
    finally:
        if tty:
            sys.stderr.write("\n")


def fail(message: str) -> int:
    sys.stderr.write(f"error: {message}\n")
    return EXIT_ERROR


def ig_steps(args) -> tuple[int | None, float | None]:
    """Integrated Gradients' (n_steps, tolerance) for the core from --n-steps/--tolerance: neither
    given: the core's default (adaptive, DEFAULT_TOLERANCE); --tolerance 0: fixed steps (--n-steps,
    or FIXED_N_STEPS)."""
    if args.tolerance == 0:
        return args.n_steps or FIXED_N_STEPS, None
    return args.n_steps, args.tolerance


def explain_by_method(args, ig, occlude, what: str, show, sampled=None) -> int:
    """``--method integrated_gradients`` (``ig(n_steps=, tolerance=)`` with ``ig_steps``), ``occlusion``
    (``occlude()``) or, where ``sampled`` is given, ``lime``/``kernel_shap`` (``sampled(method=, n_samples=,
    seed=)`` from --n-samples and --seed): each record as a JSON line (--json) or by ``show(rec, first=)``; another
    method refused, naming ``what`` is explained and the methods that work."""
    method = getattr(args, "method", "integrated_gradients")
    if method in ("ig", "integrated_gradients"):
        n_steps, tolerance = ig_steps(args)
        records = ig(n_steps=n_steps, tolerance=tolerance)
    elif method == "occlusion":
        records = occlude()
    elif method in ("lime", "kernel_shap") and sampled is not None:
        records = sampled(method=method, n_samples=getattr(args, "n_samples", None), seed=getattr(args, "seed", 0))
    else:
        names = ("integrated_gradients, occlusion, lime or kernel_shap" if sampled is not None
                 else "integrated_gradients or occlusion")
        return fail(f"{what} is explained with --method {names}, not {method}")
    for i, rec in enumerate(records):
        if args.json:
            print_json(rec.to_dict())
        else:
            show(rec, first=i == 0)
    return 0


def model_from_args(args):
    """The model of --model on --device, loaded with the settings ``main`` read."""
    from .. import load_model  # lazily: `bertviz-app --help` and `models` import no torch

    return load_model(args.model, device=args.device, settings=args.settings)
