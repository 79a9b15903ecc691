"""Shared pieces of the web UI: error translation, the one "analyze everything" computation,
token views (merge word pieces, hide [CLS]/[SEP]) and escaped HTML for coloured tokens.

No module-level mutable state: per-user results travel in ``gr.State`` as a ``Record``;
models are cached by the core's ``load_model``.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import html
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
import numpy as np

import bertviz_app as core
from bertviz_app import service
from bertviz_app.config import Settings
from bertviz_app.explain.mixing_measures import MixingMaps, check_measure, context_mixing, supported_measures
from bertviz_app.models.encoding import check_has_words
from bertviz_app.models.inference import applied_temperature

from . import visitor

log = logging.getLogger("bertviz_app.ui")

UNEXPECTED = "Unexpected error while handling this request; the details are in the server log."
PREDICTED = "(predicted class)"
BASELINE_CHOICES = [
    ("[PAD] tokens", "pad"),
    ("[MASK] tokens", "mask"),
    ("[UNK] tokens", "unk"),
    ("zero word vectors", "zero"),
]
# What the page calls each attribution method (methods.METHODS' names; "ig" is explain_csv's short name)
METHOD_LABELS = core.METHOD_LABELS  # one table of method names, shared with the core's readings
PATH_STEPS = 20  # Integrated Gradients steps per layer for the [CLS] path
# relative convergence delta above which the attribution gets a warning, and the one "choose the
# steps automatically" guarantees: the core's default for everyone (library, CLI, API)
DELTA_WARN = core.DEFAULT_TOLERANCE


# --------------------------------------------------------------------------- errors
def user_error(exc: BaseException) -> gr.Error:
    """BertvizError -> its own (user-safe) message, logged as one line that names its kind only (the
    message may quote the visitor's rows or text); anything else -> a generic message, logged with its
    traceback. Either way gradio prints no traceback of its own (``print_exception=False``)."""
    if isinstance(exc, gr.Error):
        return exc
    if isinstance(exc, core.BertvizError):
        log.info("Refused a request: %s", type(exc).__name__)
        return gr.Error(str(exc), print_exception=False)
    log.error("Unexpected error in the UI", exc_info=exc)
    return gr.Error(UNEXPECTED, print_exception=False)


def guard(fn: Callable) -> Callable:
    """Wrap an event handler so only clear, user-safe messages reach the browser or API client.
    ``functools.wraps`` keeps the signature and type hints gradio reads (gr.Progress, gr.api)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            raise user_error(exc) from None

    return wrapper


def guard_stream(fn: Callable) -> Callable:
    """``guard`` for a generator handler: the wrapper is itself a generator function (gradio
    streams only those), and an error raised between yields is translated the same way."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            raise user_error(exc) from None

    return wrapper


def refusal_md(exc: BaseException, logged: bool = True) -> str:
    """An error as a tab's status line says it: a BertvizError's own message (what to fix), anything else
    the generic message (the details logged by ``user_error``; ``logged=False``: the caller raises it on to
    a ``guard``, which logs it)."""
    if logged:
        return f"**Error:** {esc(user_error(exc).message)}"
    safe = exc.message if isinstance(exc, gr.Error) else str(exc) if isinstance(exc, core.BertvizError) else UNEXPECTED
    return f"**Error:** {esc(safe)}"


def to_status(fn: Callable, status, also: Callable[[], dict] | None = None) -> Callable:
    """Wrap a page-only handler whose refusals belong in ``status`` (the tab's status line, a Markdown that
    is one of the event's outputs): an error is not raised (gradio would show a toast that vanishes and
    mark every output "Error") but said there, ``refusal_md``, and stays. ``also()``: more outputs set
    with it (a refused upload's File cleared). For handlers that return a value (``to_status_stream``
    for generators); an API endpoint keeps raising, so its callers still get the error."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            return {status: refusal_md(exc), **(also() if also else {})}

    return wrapper


def to_status_stream(fn: Callable, status, also: Callable[[], dict] | None = None) -> Callable:
    """``to_status`` for a generator handler (the wrapper is itself a generator function)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - this is the translation edge
            yield {status: refusal_md(exc), **(also() if also else {})}

    return wrapper


def refused_file(path: str | None, exc: BaseException, what: str = "file") -> str:
    """Why an uploaded file was refused, in plain words (the tabs keep it for a later Start or Evaluate):
    the file's name (never its server path), why, and the fix."""
    name = str(path or "").replace("\\", "/").rsplit("/", 1)[-1] or "the file"
    return f"The {what} {name} was refused: {exc} Fix the file and upload it again."


def upload_refused(path: str | None, exc: BaseException, logged: bool = True) -> str:
    """A refused upload as a tab's status line says it (``refused_file``: a file that cannot be read is to be
    fixed and uploaded again); any other refusal as ``refusal_md`` says it. ``logged``: as ``refusal_md``'s."""
    if not isinstance(exc, core.DataError):
        return refusal_md(exc, logged)
    return f"**Error:** {esc(refused_file(path, exc))}"


class Refusal:
    """Why the last run of an API-visible handler was refused, per session (``gr.State(Refusal())``, deep-
    copied fresh for each session like ``CancelFlag``): the handler sets it and raises (its API callers get
    the error), and a page-only event after it says it in the tab's status line and clears the badges."""

    def __init__(self) -> None:
        self.message = ""

    def __deepcopy__(self, memo):
        return Refusal()


def load(name: str | None, default: str, settings: Settings) -> core.LoadedModel:
    """Load what the user asked for (``service.open_model``): folder paths typed in the browser or sent
    to the API are refused unless settings.allow_local_paths; the operator's own default model is always
    allowed; in public mode another visitor's run answers as an unknown model. ``settings``: the app's."""
    return service.open_model(name, default, settings, visitor.owner())


def model_choices(default: str, settings: Settings, first: tuple[str, ...] = ()) -> list[str]:
    """The openable models (``default`` even when not built yet), each once; ``first``: names put
    before them (the fine-tune tab's base: ``encoder``, which the registry lists too)."""
    models = core.list_models(settings.models_dir)
    names = [m["name"] for m in visitor.visible(models) if m["built"]]  # public mode: own runs only
    if default not in names:
        names.insert(0, default)
    return list(dict.fromkeys([*first, *names]))


def model_line(lm: core.LoadedModel) -> str:
    n = len(lm.labels)
    kind = "multi-label" if lm.multi_label else "single-label"
    return (f"**Model:** {esc(lm.name)} · **device:** {esc(lm.device_label)} · {lm.num_layers} layers · "
            f"{n} classes ({kind}) · reads at most {lm.max_length} tokens")


def warnings_md(lm: core.LoadedModel) -> str:
    return "\n\n".join(f"**Warning:** {esc(w)}" for w in lm.warnings)


def esc(text: object) -> str:
    """Escape user text for Markdown output: HTML (Markdown passes raw HTML through) and Markdown
    syntax. Quotes stay as they are: an escaped &#x27; would then have its '#' escaped and show
    up literally, and quotes are harmless outside attributes."""
    s = html.escape(str(text), quote=False)
    for ch in "\\`*_[]|#":
        s = s.replace(ch, "\\" + ch)
    return s


finite = service.finite


class CancelFlag:
    """Per-session cancel handle kept in ``gr.State(CancelFlag())``. Gradio deep-copies a State's
    initial value once per session, so each session gets its own fresh flag (a threading.Event
    cannot be deep-copied; a callable initial value would add an API endpoint)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __deepcopy__(self, memo):
        return CancelFlag()

    def arm(self) -> threading.Event:
        """A fresh event for the next run (an earlier run keeps its own, already set if cancelled)."""
        self.event = threading.Event()
        return self.event


# --------------------------------------------------------------------------- the analysis
@dataclass(frozen=True)
class Calibration:
    """How the Predict tab's probabilities were temperature-scaled (the model folder's calibration.json):
    ``Record.prediction`` holds softmax(logits / temperature), ``raw_probs`` the model's own softmax
    (what the attributions, the [CLS] lens and faithfulness read). ``rows``/``source``: what T was
    fitted on, None where the file does not say."""

    temperature: float
    raw_probs: tuple[float, ...]
    rows: int | None = None
    source: str | None = None


@dataclass(frozen=True, eq=False)
class Record:
    """Everything one Analyze computed; kept per user in gr.State, re-rendered without recomputing."""

    model: str
    labels: tuple[str, ...]
    device_label: str
    prediction: core.Prediction
    maps: core.AttentionMaps
    lens: core.ClsLens
    # None while Integrated Gradients are still running (Analyze shows the rest first) or skipped
    attribution: core.Attribution | None = None
    path: core.ClsPath | None = None
    faith: core.Faithfulness | None = None  # ERASER faithfulness of ``attribution``
    baseline_jumps: bool = False  # the path from the attribution's baseline starts with a jump (core.baseline_jumps)
    ig_failed: bool = False  # Analyze's Integrated Gradients ended in an error (the tab says so, not "being computed")
    # the model's settings' min_change (BERTVIZ_MIN_CHANGE): the floor of the colour scales drawn for this text
    min_change: float = core.Settings.min_change
    # the Attention tab's measure other than raw attention (value zeroing, ALTI...), None for raw attention
    mixing: MixingMaps | None = None
    # the prediction is temperature-scaled (calibration.json): T, the raw probabilities; None: they are raw
    calibration: Calibration | None = None


def calibrated_prediction(lm: core.LoadedModel, raw: core.Prediction) -> tuple[core.Prediction, Calibration | None]:
    """``raw`` (predict's ``calibrated=False`` answer) as predict reports it by default: divided by the model's
    temperature where its folder holds a calibration.json (then with a ``Calibration`` carrying the raw
    probabilities and what T was fitted on), else unchanged with None. One forward pass gives both."""
    t = applied_temperature(lm, True)
    if t == 1.0:
        return raw, None
    probs = tuple(float(x) for x in core.rescale_probs(raw.probs, t))
    info = core.calibration_info(lm.path) or {}
    if info.get("temperature") != t:  # the file changed since the model was loaded: T is what was applied
        info = {}
    cal = Calibration(temperature=t, raw_probs=tuple(float(x) for x in raw.probs), rows=info.get("rows"),
                      source=info.get("source"))
    return dataclasses.replace(raw, probs=probs, temperature=t), cal


def target_arg(target: str | None) -> str | None:
    return None if not target or target == PREDICTED else target


def stride_slider(elem_id: str, scale: int) -> gr.Slider:
    """The whole-document parts' stride control (0-256, predict's 128); ``window_stride`` reads it."""
    return gr.Slider(0, 256, value=128, step=1, label="Tokens shared by neighbouring windows (stride)",
                     elem_id=elem_id, scale=scale)


def window_stride(lm: core.LoadedModel, value) -> int:
    """The whole-document parts' stride slider (0-256) -> the stride read: at most half the model's
    length, as predict allows (None: predict's 128)."""
    return min(int(value if value is not None else 128), lm.max_length // 2)


def tolerance_arg(auto: bool) -> float | None:
    """The UI's "choose the steps automatically": a guaranteed relative delta of DELTA_WARN."""
    return DELTA_WARN if auto else None


def analyze_fast(lm: core.LoadedModel, text: str, pair: str | None,
                 progress: Callable[[float, str], Any] | None = None, window: bool = False,
                 measure: str | None = "raw") -> Record:
    """The quick part of Analyze (one forward pass each): prediction, attention, [CLS] lens.
    Shown at once; a long text's Integrated Gradients (``analyze_ig``) can take a minute.
    ``window``: a text past the model's length is classified whole (mean of the logits of
    windows overlapping by a quarter of the length); the charts still read its first window.
    ``measure``: the Attention tab's measure, computed too when it is not raw attention and the
    model's family supports it (``with_measure``)."""
    step = progress or (lambda *_: None)
    pair = pair if pair and pair.strip() else None
    check_has_words(lm, text, pair)  # an empty text, or "[CLS] [SEP]": one clear message before any work
    step(0.05, "Predicting")
    # window stride: a quarter of the model's length shared by neighbours (128 tokens for BERT's 512)
    # batched with /predict; the raw softmax, then temperature-scaled as predict reports it (both kept)
    raw = core.predict_one(lm, text, pair, window=bool(window), stride=lm.max_length // 4, calibrated=False)
    pred, calibration = calibrated_prediction(lm, raw)
    step(0.1, "Reading attention")
    maps = core.attention(lm, text, pair=pair)
    maps = core.AttentionMaps(info=maps.info, weights=maps.weights.astype(np.float16))  # halves per-user memory
    step(0.15, "[CLS] lens")
    lens = core.cls_lens(lm, text, pair=pair)
    rec = Record(lm.name, lm.labels, lm.device_label, pred, maps, lens, min_change=lm.settings.min_change,
                 calibration=calibration)
    if measure and measure != "raw" and measure in supported_measures(lm):
        step(0.17, "Context mixing")
        rec = with_measure(lm, rec, measure)
    return rec


def with_measure(lm: core.LoadedModel, rec: Record, measure: str | None) -> Record:
    """``rec`` with the Attention tab's ``measure`` computed for its text (``Record.mixing``; raw
    attention: None, the record's own maps). An unknown or unsupported measure: InputError saying
    which work (``check_measure``)."""
    measure = check_measure(lm, measure or "raw")
    if measure == "raw":
        return dataclasses.replace(rec, mixing=None) if rec.mixing is not None else rec
    if rec.mixing is not None and rec.mixing.measure == measure:
        return rec
    mm = context_mixing(lm, rec.prediction.text, rec.prediction.pair, measure)
    mm = dataclasses.replace(mm, weights=mm.weights.astype(np.float16))  # per-head maps: half the per-user memory
    return dataclasses.replace(rec, mixing=mm)


def analyze_ig(lm: core.LoadedModel, rec: Record, target: str | None, baseline: str, n_steps: int,
               progress: Callable[[float, str], Any] | None = None, auto: bool = False,
               on_attribution: Callable[[core.Attribution], Any] | None = None) -> Record:
    """The slow part, added to ``rec``: Integrated Gradients, their ERASER faithfulness (one batched
    forward pass) and the [CLS] path. ``on_attribution(attr)`` is called as soon as the Integrated
    Gradients are there (``AnalyzeProgress`` times the [CLS] path from them)."""
    step = progress or (lambda *_: None)
    text, pair = rec.prediction.text, rec.prediction.pair
    step(0.25, "Integrated Gradients")
    attr = core.attribute(lm, text, target=target_arg(target), baseline=baseline, n_steps=int(n_steps), pair=pair,
                          tolerance=tolerance_arg(auto))
    if on_attribution is not None:
        on_attribution(attr)
    step(0.55, "Faithfulness")
    faith = core.faithfulness(lm, attr)
    step(0.6, "[CLS] path through the layers")
    path = core.cls_path(lm, text, target=attr.target, baseline=baseline, n_steps=PATH_STEPS, pair=pair)
    return dataclasses.replace(rec, attribution=attr, path=path, faith=faith,
                               baseline_jumps=core.baseline_jumps(lm, baseline))


def analyze_all(lm: core.LoadedModel, text: str, pair: str | None, target: str | None, baseline: str,
                n_steps: int, progress: Callable[[float, str], Any] | None = None, auto: bool = False) -> Record:
    """predict + attention + [CLS] lens + attribution + [CLS] path, once."""
    rec = analyze_fast(lm, text, pair, progress)
    return analyze_ig(lm, rec, target, baseline, n_steps, progress, auto)


# --------------------------------------------------------------------------- progress by the Analyze button
class AnalyzeProgress:
    """How far one Analyze is and about how long it has left, for the Analyze button and the status
    line beside it (gradio's own progress bar sits on the outputs, below the fold for a long text).

    Fed from the worker thread by the analysis' own step callbacks (``step``: the ``progress`` of
    ``analyze_fast``/``analyze_ig``) and ``ig_done``; read by the handler (``label``, ``status``).
    The time left is counted in this text's own forward pass (``core.attention``, timed between
    the "Reading attention" and "[CLS] lens" steps): a gradient evaluation of Integrated Gradients
    costs about ``EVAL_PASSES`` passes, a [CLS] path step ``PATH_SHARE`` of an evaluation (its
    passes start part-way up the model). Once the Integrated Gradients are done, their own time
    per evaluation replaces the guess, so the [CLS] path (most of a long text's wait) is estimated
    from this machine's measured speed. Measured on the default model, 2 busy cores: 512 tokens:
    a pass 0.41 s, 13 evaluations 6.3 s, the path (7 depths x 20 steps) 33.6 s; 134 tokens:
    0.042 s, 41 evaluations 4.8 s, path 7.9 s.

    One tracker follows the whole Analyze event (the quick part, then Integrated Gradients).
    ``clock``: seconds (``time.monotonic``; a test passes its own)."""

    EVAL_PASSES = 2.0  # one gradient evaluation ~ forward + backward: 1.2-2.8 forward passes (measured)
    AUTO_EVALS = 20  # "choose the steps automatically": 13 evaluations at first, more where the path bends
    FAITH_PASSES = 3.0  # faithfulness: ten masked copies in one batch
    PATH_SHARE = 0.5  # a [CLS] path step costs about half an Integrated Gradients evaluation (0.48-0.50)
    IG_PHASES = ("Starting Integrated Gradients", "Integrated Gradients", "Faithfulness",
                 "[CLS] path through the layers")
    SKIP_HINT = ("Tick **Skip Integrated Gradients** for the prediction and attention alone: Integrated Gradients "
                 "on a long text take up to a minute.")

    def __init__(self, n_layers: int = 12, n_steps: int = 50, auto: bool = True, skip_ig: bool = False,
                 clock: Callable[[], float] | None = None) -> None:
        import time

        self.clock = clock or time.monotonic
        self.n_layers, self.skip_ig = int(n_layers), bool(skip_ig)
        self.evals = self.AUTO_EVALS if auto else int(n_steps)
        self.t0 = self.clock()
        self.phase, self.phase_t0 = "Loading the model", self.t0
        self.attention_t0: float | None = None
        self.t_pass: float | None = None  # one forward pass of this text (s)
        self.t_eval: float | None = None  # one gradient evaluation, once Integrated Gradients are done (s)
        self.shown = 0.0  # the fraction shown so far (it never goes back)
        self.lock = threading.Lock()

    # ------------------------------------------------------------ fed by the analysis (worker thread)
    def step(self, fraction: float, desc: str) -> None:
        now = self.clock()
        with self.lock:
            if desc == "Reading attention":
                self.attention_t0 = now
            elif desc == "[CLS] lens" and self.attention_t0 is not None:
                self.t_pass = max(now - self.attention_t0, 1e-4)
            self.phase, self.phase_t0 = desc, now

    def ig_done(self, attr: core.Attribution) -> None:
        now = self.clock()
        with self.lock:
            took = now - self.phase_t0  # the "Integrated Gradients" phase began with analyze_ig's step
            if attr.n_steps > 0 and took > 0:
                self.t_eval = took / attr.n_steps

    # ------------------------------------------------------------ estimates
    def _plan(self) -> list[tuple[str, float]] | None:
        """(phase, estimated seconds) of every phase from the [CLS] lens on; None before any timing."""
        t_pass = self.t_pass or (self.t_eval / self.EVAL_PASSES if self.t_eval else None)
        if t_pass is None:
            return None
        t_eval = self.t_eval or self.EVAL_PASSES * t_pass
        plan = [("[CLS] lens", t_pass)]
        if not self.skip_ig:
            plan += [(self.IG_PHASES[0], 0.0), (self.IG_PHASES[1], self.evals * self.EVAL_PASSES * t_pass),
                     (self.IG_PHASES[2], self.FAITH_PASSES * t_pass),
                     (self.IG_PHASES[3], (self.n_layers + 1) * PATH_STEPS * self.PATH_SHARE * t_eval)]
        return plan

    def left(self) -> float | None:
        """Seconds left (an estimate), or None while nothing has been timed yet."""
        with self.lock:
            plan = self._plan()
            if plan is None:
                return None
            names = [n for n, _ in plan]
            if self.phase not in names:  # still loading, predicting or reading attention
                return sum(sec for _, sec in plan)
            i = names.index(self.phase)
            spent = self.clock() - self.phase_t0
            current = max(plan[i][1] - spent, 0.15 * spent)  # a phase past its estimate: about 85% done
            return current + sum(sec for _, sec in plan[i + 1:])

    def fraction(self) -> float:
        left = self.left()
        spent = self.clock() - self.t0
        now = 0.02 if left is None else spent / max(spent + left, 1e-9)
        self.shown = min(max(self.shown, now), 0.99)
        return self.shown

    # ------------------------------------------------------------ shown
    @staticmethod
    def duration(seconds: float) -> str:
        if seconds < 1.5:
            return "about a second"
        if seconds < 90:
            return f"about {round(seconds):d} s"
        return f"about {round(seconds / 60):d} min"

    def label(self) -> str:
        """The Analyze button's text while it runs: 'Analyzing… 40% · about 12 s left'."""
        left = self.left()
        pct = f"{self.fraction():.0%}"
        return f"Analyzing\u2026 {pct}" + ("" if left is None else f" \u00b7 {self.duration(left)} left")

    def status(self) -> str:
        """The line beside the button: what runs now, and the skip hint unless IG is skipped."""
        with self.lock:
            phase = self.phase
        ready = "; the prediction and attention are ready" if phase in self.IG_PHASES else ""
        spent = round(self.clock() - self.t0)
        return (f"**{phase}\u2026** {spent:d} s so far{ready}." + ("" if self.skip_ig else " " + self.SKIP_HINT))


UPDATE_EVERY = 0.5  # seconds between two progress updates of a streamed handler


def stream_work(work: Callable[[], Any], update: Callable[[], dict], on_abandon: Callable[[], Any] | None = None):
    """For a generator handler: run ``work()`` in a thread, yield ``update()`` at once and every
    ``UPDATE_EVERY`` seconds while it runs, and return its result (``out = yield from ...``) or
    raise its error. ``work`` runs in the event's context (``contextvars``), so the visitor behind the
    event is known there as in the handler (public mode). If the page goes away (the generator is
    closed), ``on_abandon()`` is called (e.g. to cancel the work) and the work is waited for, so the
    event's concurrency slot stays taken as long as the model is busy."""
    box: dict = {}
    context = contextvars.copy_context()  # the event's gradio context (its request: who the visitor is)

    def run():
        try:
            box["out"] = context.run(work)
        except BaseException as exc:  # noqa: BLE001 - raised again in the handler's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="analyze", daemon=True)
    worker.start()
    try:
        yield update()
        while True:
            worker.join(UPDATE_EVERY)
            if not worker.is_alive():
                break
            yield update()
    finally:
        if worker.is_alive() and on_abandon is not None:
            on_abandon()
        worker.join()
    if "error" in box:
        raise box["error"]
    return box["out"]


# --------------------------------------------------------------------------- token views
@dataclass(frozen=True)
class TokenView:
    """Which units to show (tokens or words) and which of them are [CLS]/[SEP]."""

    labels: list[str]
    special: np.ndarray  # (N,) bool
    groups: core.WordGroups | None  # set when word pieces were merged

    def keep(self, hide_specials: bool) -> np.ndarray:
        return np.flatnonzero(~self.special) if hide_specials and (~self.special).any() else np.arange(len(self.labels))


def token_view(info: core.TokenInfo, merge: bool) -> TokenView:
    special_tok = np.array([s is None for s in info.sequence_ids], dtype=bool)
    if not merge:
        return TokenView(list(info.tokens), special_tok, None)
    groups = core.word_groups(info)
    special = np.array([len(g) == 1 and special_tok[g[0]] for g in groups.groups], dtype=bool)
    return TokenView(list(groups.words), special, groups)


def view_matrix(weights: np.ndarray, view: TokenView, keep: np.ndarray) -> np.ndarray:
    """(..., T, T) -> (..., N, N) in the view's units, restricted to ``keep``."""
    w = np.asarray(weights, dtype=np.float32)
    if view.groups is not None:
        w = core.merge_attention(w, view.groups)
    return w[..., keep[:, None], keep[None, :]] if w.ndim >= 2 else w


def view_scores(scores: np.ndarray, view: TokenView, keep: np.ndarray | None = None) -> np.ndarray:
    """(..., T) -> (..., N): attributions summed over a word's pieces."""
    s = np.asarray(scores, dtype=np.float64)
    if view.groups is not None:
        s = core.merge_scores(s, view.groups)
    return s if keep is None else s[..., keep]


# --------------------------------------------------------------------------- coloured tokens
def tokens_html(labels: list[str], scores: np.ndarray, special: np.ndarray, attr: core.Attribution,
                title: str = "", min_change: float = core.Settings.min_change) -> str:
    """Tokens coloured by their attribution on the core's absolute scale (``core.colour_scale``:
    a share of f(x) - f(baseline), the same for every text), with its warning when the change is
    too small to read. Every piece of text is escaped by the core."""
    scale = core.colour_scale(attr, min_change)
    return core.tokens_html(labels, scores, special, attr.target, scale, title,
                            core.change_warning(attr, scale, scores),
                            signed=core.is_signed(attr.method))


CSS = """
.bv-tokens { line-height: 2.1; font-size: 1.05em; }
.bv-tok { padding: 2px 4px; border-radius: 4px; margin: 0 1px; white-space: pre-wrap; }
.bv-legend { margin-top: 6px; font-size: 0.85em; color: var(--body-text-color-subdued); line-height: 1.8; }
.bv-title { font-weight: 600; margin-bottom: 4px; }
.bv-warn { border-left: 4px solid #e69f00; padding: 4px 10px; margin: 6px 0; line-height: 1.5; }
/* a running Analyze shows its progress on the button: keep that text as readable as when it is enabled */
#bv-analyze:disabled { opacity: 1; filter: none; color: var(--button-primary-text-color);
                       background: var(--button-primary-background-fill); cursor: progress; }
/* table headers wrap between words, never inside one ("comprehen|siveness"): gradio's wrapped
   cells use word-break: break-word, which splits a word wider than its column */
.bv-table thead th, .bv-table thead th * { word-break: normal !important; overflow-wrap: normal !important;
                                           hyphens: manual; }
"""
