"""What an attribution is asked, checked, and what it runs on, shared by every attribution of the class head
(``attribution``, ``cls_path``, the engine in ``ig_engine``) and the entity and span explainers: the baselines (the
ones a model's tokenizer can build, the ones whose path starts with a jump, their token ids), the output (probability
or logit), the steps (fixed, or adaptive to a tolerance), the speed options, the forward that is differentiated, and
a batch run again halved on out-of-memory."""

from __future__ import annotations

import logging

import numpy as np
import torch

from ..config import Settings
from ..errors import InputError, ResourceError
from ..models.families import family_of
from ..models.forward import ATTENTIONS
from ..models.inference import probabilities
from ..models.registry import LoadedModel
from ..results import DEFAULT_TOLERANCE

__all__ = ["BASELINES", "OUTPUTS", "TOKEN_BUDGET", "speed_options", "steps_mode", "check_args", "target_output",
           "forward_ids", "baseline_jumps", "recommended_baseline", "baseline_token", "usable_baselines",
           "baseline_ids", "halving_on_oom"]

BASELINES = ("pad", "mask", "unk", "zero")
OUTPUTS = ("prob", "logit")
# Tokens x steps per internal batch: keeps a 512-token explanation within ~2 GB on a CPU.
TOKEN_BUDGET = 4096
log = logging.getLogger(__name__)


def speed_options(lm: LoadedModel, attention: str | None = None,
                  cls_only_last_layer: bool | None = None) -> tuple[str, bool]:
    """The speed options of one attribution call, (attention, cls_only): its arguments, or the
    model's settings' ``ig_attention`` and ``cls_only_last_layer`` where they are None."""
    settings = lm.settings
    attention = settings.ig_attention if attention is None else attention
    if attention not in ATTENTIONS:
        raise InputError(f"attention must be one of {', '.join(ATTENTIONS)}, got {attention!r}.")
    return attention, settings.cls_only_last_layer if cls_only_last_layer is None else bool(cls_only_last_layer)


def steps_mode(n_steps: int | None = None, tolerance: float | None = None) -> tuple[int | None, float | None]:
    """The (n_steps, tolerance) one Integrated Gradients call runs with, from its arguments:
    ``tolerance`` given: adaptive steps for that relative delta (``n_steps`` is ignored);
    ``n_steps`` alone: exactly that many steps; neither: adaptive at ``DEFAULT_TOLERANCE``.
    Exactly one of the two returned values is None."""
    if tolerance is not None:
        return None, tolerance
    if n_steps is not None:
        return n_steps, None
    return None, DEFAULT_TOLERANCE


def check_args(baseline: str, n_steps: int | None, output: str, tolerance: float | None = None, *,
               max_n_steps: int = Settings.max_n_steps) -> None:
    """Refuse (InputError, saying what to use) a baseline not in BASELINES, an output not in OUTPUTS,
    a tolerance outside (0, 1), or fixed ``n_steps`` outside 2..``max_n_steps`` (callers with a model
    pass ``lm.settings.max_n_steps``). ``n_steps`` None with a tolerance: adaptive, nothing to check."""
    if tolerance is not None and (
        isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1
    ):
        raise InputError(f"tolerance must be a relative delta between 0 and 1 (e.g. 0.01), got {tolerance!r}.")
    if baseline not in BASELINES:
        raise InputError(f"Unknown baseline {baseline!r}: choose one of {', '.join(BASELINES)}.")
    if output not in OUTPUTS:
        raise InputError(f"Unknown output {output!r}: choose prob or logit.")
    if n_steps is None and tolerance is not None:  # adaptive: the steps are chosen, not given
        return
    limit = max_n_steps
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or not 2 <= n_steps <= limit:
        raise InputError(f"n_steps must be a whole number from 2 to {limit}, got {n_steps!r}.")


def target_output(lm: LoadedModel, output: str, logits: torch.Tensor) -> torch.Tensor:
    """logits (B, C) -> what is attributed (B, C): the logits, or the probabilities predict reports."""
    return logits if output == "logit" else probabilities(lm, logits)


def forward_ids(model, lm: LoadedModel, output: str, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 token_type_ids: torch.Tensor) -> torch.Tensor:
    """Class outputs (B, C) for token ids (B, T) with one text's mask and token types (1, T),
    through the model's own forward (eager, every layer)."""
    n = input_ids.shape[0]
    logits = model(**family_of(model).inputs(
        input_ids=input_ids,
        attention_mask=attention_mask.expand(n, -1),
        token_type_ids=token_type_ids.expand(n, -1),
    )).logits  # (B, C)
    return target_output(lm, output, logits)


def baseline_jumps(lm: LoadedModel, baseline: str) -> bool:
    """Does the straight path from ``baseline`` start with a jump? True where the model's depth-0
    embedding is LayerNorm(word vector) alone (DeBERTa-v3) and the baseline's word vector is zero
    (the "zero" baseline, or a [PAD] row kept at zero by ``padding_idx``): every point of the path
    but the first then gives the same embeddings, so Integrated Gradients from it need many more
    steps and measure that jump rather than the words. ``recommended_baseline`` avoids it."""
    model = lm.fp32_model()
    fam = family_of(model)
    if fam is None or not fam.scale_free_embeddings(model):
        return False
    if baseline == "zero":
        return True
    token_id = getattr(lm.tokenizer, f"{baseline}_token_id", None)
    if token_id is None:
        return False
    return not bool(fam.word_embeddings(model).weight[token_id].detach().abs().sum())


def recommended_baseline(lm: LoadedModel) -> str:
    """"pad", or the first of "mask" and "unk" whose path does not start with a jump
    (``baseline_jumps``) on models where [PAD]'s does."""
    for name in ("pad", "mask", "unk"):
        if getattr(lm.tokenizer, f"{name}_token_id", None) is not None and not baseline_jumps(lm, name):
            return name
    return "pad"


def baseline_token(baseline: str) -> str:
    """The token a baseline replaces every word with ("zero" starts from [PAD]'s ids, then zeroes their vectors)."""
    return "pad" if baseline == "zero" else baseline


def usable_baselines(lm: LoadedModel) -> tuple[str, ...]:
    """The ``BASELINES`` this model's tokenizer can build, in that order: those whose token it has
    (``baseline_ids`` refuses the others); a page offers only these."""
    return tuple(b for b in BASELINES if getattr(lm.tokenizer, f"{baseline_token(b)}_token_id", None) is not None)


def baseline_ids(lm: LoadedModel, input_ids: torch.Tensor, baseline: str) -> torch.Tensor:
    """Every token replaced by [PAD]/[MASK]/[UNK], keeping [CLS] and [SEP] where they are."""
    tok = lm.tokenizer
    name = baseline_token(baseline)
    token_id = getattr(tok, f"{name}_token_id")
    if token_id is None:
        raise InputError(f"This model's tokenizer has no [{name.upper()}] token: choose another baseline.")
    special = torch.tensor(
        tok.get_special_tokens_mask(input_ids[0].tolist(), already_has_special_tokens=True), dtype=torch.bool
    ).to(input_ids.device)  # (T,)
    out = input_ids.clone()  # (1, T)
    out[0, ~special] = token_id
    return out


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    said = "out of memory" in text or "can't allocate memory" in text or "not enough memory" in text
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and said)


def halving_on_oom(run, batch: int):
    """``run(batch)``, halving the batch on out-of-memory and trying again; at a batch of one it
    gives up with a ResourceError (a clear message) instead of taking the server down."""
    batch = max(1, int(batch))
    while True:
        try:
            return run(batch)
        except (RuntimeError, MemoryError) as exc:
            if not _is_oom(exc):
                raise
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if batch == 1:
                raise ResourceError(
                    "Out of memory while computing attributions, even one step at a time: shorten the text "
                    "or lower n_steps."
                ) from exc
            log.warning("attribution ran out of memory with internal batch %d; retrying with %d", batch, batch // 2)
            batch //= 2
