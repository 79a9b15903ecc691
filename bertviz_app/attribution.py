"""Integrated Gradients along the [CLS] path, with the numbers that say how far to trust them.

- ``attribute``: token attributions on the word embeddings (Captum LayerIntegratedGradients;
  the "zero" baseline uses IntegratedGradients on the embedding vectors: the same integral,
  starting from all-zero word vectors).
- ``cls_path``: the same attribution taken at the output of the embeddings and of every encoder
  layer (layers x tokens): how the evidence moves into the [CLS] position with depth.
- ``cls_lens``: class probabilities read from each layer's [CLS] state through the pooler and
  classifier.
Attributions always run in float32 (``LoadedModel.fp32_model``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from captum.attr import IntegratedGradients

from .config import get_settings
from .encoding import encode
from .errors import InputError, ResourceError
from .registry import LoadedModel, attention_implementation
from .results import Attribution, ClsLens, ClsPath, TokenInfo

__all__ = ["attribute", "cls_path", "cls_lens", "BASELINES", "OUTPUTS"]

BASELINES = ("pad", "mask", "unk", "zero")
OUTPUTS = ("prob", "logit")
# Tokens x steps per internal batch: keeps a 512-token explanation within ~2 GB on a CPU.
TOKEN_BUDGET = 4096
# Gauss-Legendre steps an adaptive (``tolerance=``) attribution starts from, doubling until met.
ADAPTIVE_START = 16  # measured: fewer than 16 almost never reaches 0.05 on a fine-tuned model
# Attention kernel for the IG forward/backward passes (no maps are needed; bench/ flips it).
IG_ATTENTION = "sdpa"
log = logging.getLogger(__name__)


def _check_args(baseline: str, n_steps: int, output: str) -> None:
    if baseline not in BASELINES:
        raise InputError(f"Unknown baseline {baseline!r}: choose one of {', '.join(BASELINES)}.")
    if output not in OUTPUTS:
        raise InputError(f"Unknown output {output!r}: choose prob or logit.")
    limit = get_settings().max_n_steps
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or not 2 <= n_steps <= limit:
        raise InputError(f"n_steps must be a whole number from 2 to {limit}, got {n_steps!r}.")


@dataclass
class _Setup:
    """Everything one attribution needs, computed once."""

    model: torch.nn.Module
    info: TokenInfo
    ids: torch.Tensor  # (1, T)
    base_ids: torch.Tensor  # (1, T)
    mask: torch.Tensor  # (1, T)
    types: torch.Tensor  # (1, T)
    target_idx: int
    f_x: float
    f_b: float
    internal_batch_size: int
    output: str
    multi_label: bool

    def head(self, logits: torch.Tensor) -> torch.Tensor:
        """logits (B, C) -> what is attributed (B, C): probabilities or the logits themselves."""
        if self.output == "logit":
            return logits
        return torch.sigmoid(logits) if self.multi_label else torch.softmax(logits, dim=-1)

    def forward_ids(self, input_ids, attention_mask, token_type_ids):
        n = input_ids.shape[0]
        logits = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask.expand(n, -1),
            token_type_ids=token_type_ids.expand(n, -1),
        ).logits  # (B, C)
        return self.head(logits)

    def forward_embeds(self, inputs_embeds, attention_mask, token_type_ids):
        n = inputs_embeds.shape[0]
        logits = self.model(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask.expand(n, -1),
            token_type_ids=token_type_ids.expand(n, -1),
        ).logits  # (B, C)
        return self.head(logits)

    def ig_kwargs(self, n_steps: int) -> dict:
        return dict(
            target=self.target_idx,
            n_steps=int(n_steps),
            additional_forward_args=(self.mask, self.types),
            internal_batch_size=self.internal_batch_size,
            return_convergence_delta=True,
        )


def _baseline_ids(lm: LoadedModel, input_ids: torch.Tensor, baseline: str) -> torch.Tensor:
    """Every token replaced by [PAD]/[MASK]/[UNK], keeping [CLS] and [SEP] where they are."""
    tok = lm.tokenizer
    name = "pad" if baseline == "zero" else baseline
    token_id = getattr(tok, f"{name}_token_id")
    if token_id is None:
        raise InputError(f"This model's tokenizer has no [{name.upper()}] token: choose another baseline.")
    special = torch.tensor(
        tok.get_special_tokens_mask(input_ids[0].tolist(), already_has_special_tokens=True), dtype=torch.bool
    ).to(input_ids.device)  # (T,)
    out = input_ids.clone()  # (1, T)
    out[0, ~special] = token_id
    return out


def _setup(lm: LoadedModel, text, pair, target, baseline: str, n_steps: int, output: str) -> _Setup:
    _check_args(baseline, n_steps, output)
    model = lm.fp32_model()
    inputs, info = encode(lm, text, pair)
    ids = inputs["input_ids"]  # (1, T)
    mask = inputs["attention_mask"]  # (1, T)
    types = inputs.get("token_type_ids", torch.zeros_like(ids))  # (1, T)
    base_ids = _baseline_ids(lm, ids, baseline)  # (1, T)
    target_idx = lm.label_index(target)
    s = _Setup(model, info, ids, base_ids, mask, types, -1, 0.0, 0.0,
               max(1, min(n_steps, TOKEN_BUDGET // ids.shape[1])), output, lm.multi_label)
    with torch.no_grad():
        if baseline == "zero":
            emb = model.bert.embeddings.word_embeddings(ids)  # (1, T, D)
            keep = (base_ids != ids).logical_not().unsqueeze(-1)  # (1, T, 1): specials keep their vectors
            both = s.forward_embeds(torch.cat([emb, emb * keep]), mask, types)  # (2, C)
        else:
            both = s.forward_ids(torch.cat([ids, base_ids]), mask, types)  # (2, C)
    s.target_idx = int(both[0].argmax()) if target_idx is None else target_idx
    s.f_x, s.f_b = float(both[0, s.target_idx]), float(both[1, s.target_idx])
    return s


def attribute(
    lm: LoadedModel,
    text: str,
    target: str | int | None = None,
    baseline: str = "pad",
    n_steps: int = 50,
    pair: str | None = None,
    output: str = "prob",
    tolerance: float | None = None,
) -> Attribution:
    """Signed per-token attribution of class ``target`` (default: the predicted class).

    ``scores.sum() + delta == f(x) - f(baseline)`` where f is the class probability
    (``output="prob"``) or logit, and ``delta`` is the convergence delta (Captum's definition).

    ``tolerance`` (opt-in): a guaranteed relative delta. The attribution starts with
    ``min(n_steps, 16)`` Gauss-Legendre steps and doubles them until
    ``relative_delta <= tolerance`` (or ``|delta| <= 1e-6``); only if the settings' ``max_n_steps``
    is reached first is a looser result returned (its ``relative_delta`` says so, and a warning
    is logged). ``n_steps`` in the result is the number of steps actually used.
    """
    if tolerance is not None and (
        isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 < tolerance < 1
    ):
        raise InputError(f"tolerance must be a relative delta between 0 and 1 (e.g. 0.01), got {tolerance!r}.")
    limit = get_settings().max_n_steps
    with lm.run_lock, attention_implementation(lm.fp32_model(), IG_ATTENTION):
        s = _setup(lm, text, pair, target, baseline, n_steps, output)
        with torch.no_grad():
            emb = s.model.bert.embeddings.word_embeddings(s.ids)  # (1, T, D)
            if baseline == "zero":
                keep = (s.base_ids == s.ids).unsqueeze(-1)  # (1, T, 1): specials keep their vectors
                base_emb = emb * keep  # (1, T, D): zero vectors except [CLS]/[SEP]
            else:
                base_emb = s.model.bert.embeddings.word_embeddings(s.base_ids)  # (1, T, D)
        # IG on the word vectors is exactly LayerIntegratedGradients on the word-embedding layer,
        # without its two extra forward passes to read the layer; f(x) and f(baseline) are known
        # from _setup, so the delta needs no further forward passes either.
        ig = IntegratedGradients(s.forward_embeds)
        steps = int(n_steps) if tolerance is None else min(int(n_steps), ADAPTIVE_START)
        gap = s.f_x - s.f_b
        while True:
            attrs = _ig_retrying(
                ig,
                emb,
                max(1, min(steps, TOKEN_BUDGET // s.ids.shape[1])),
                baselines=base_emb,
                target=s.target_idx,
                n_steps=steps,
                additional_forward_args=(s.mask, s.types),
            )  # (1, T, D)
            delta = float(attrs.sum()) - gap
            if tolerance is None or abs(delta) <= max(tolerance * abs(gap), 1e-6):
                break
            if steps >= limit:
                log.warning("attribute: relative delta %.3g > tolerance %g at max_n_steps=%d", abs(delta) / max(abs(gap), 1e-12), tolerance, limit)
                break
            steps = min(limit, steps * 2)
    scores = attrs.sum(dim=-1)[0].detach().float().cpu().numpy()  # (T,)
    return Attribution(
        info=s.info,
        scores=scores,
        target=lm.labels[s.target_idx],
        target_index=s.target_idx,
        output=output,
        f_x=s.f_x,
        f_baseline=s.f_b,
        delta=delta,
        n_steps=int(steps),
        baseline=baseline,
    )


def cls_path(
    lm: LoadedModel,
    text: str,
    target: str | int | None = None,
    baseline: str = "pad",
    n_steps: int = 20,
    pair: str | None = None,
    output: str = "prob",
) -> ClsPath:
    """Layer Integrated Gradients at the embedding output and every encoder layer's output.

    Row l, column t: how much the hidden state of token t after depth l contributes to the
    target class. At the last layer only [CLS] can contribute (the pooler reads [CLS] alone),
    so the rows show evidence flowing from the word positions into [CLS]. Each row is its own
    attribution from the same baseline, so each row sums to f(x) - f(baseline) - deltas[l].
    The "zero" baseline is taken as "pad" here (a zero vector has no defined deeper states).

    This is Layer IG computed as Captum IntegratedGradients on each depth's hidden state with a
    forward pass that runs only the layers above it: the same integral as LayerIntegratedGradients
    on that layer (a test checks they agree) at about half the layer passes, with no hooks.
    """
    path_baseline = "pad" if baseline == "zero" else baseline
    with lm.run_lock:
        s = _setup(lm, text, pair, target, path_baseline, n_steps, output)
        bert = s.model.bert
        n_layers = len(bert.encoder.layer)
        with torch.no_grad():
            kw = dict(attention_mask=s.mask.expand(2, -1), token_type_ids=s.types.expand(2, -1), output_hidden_states=True)
            states = bert(input_ids=torch.cat([s.ids, s.base_ids]), **kw).hidden_states  # L + 1 x (2, T, D)
        rows, deltas = [], []
        for depth in range(n_layers + 1):
            x, b = states[depth][:1], states[depth][1:]  # (1, T, D) input and baseline states at this depth
            ig = IntegratedGradients(_from_depth(s, depth))
            attrs, delta = _ig_retrying(
                ig,
                x,
                s.internal_batch_size,
                baselines=b,
                target=s.target_idx,
                n_steps=int(n_steps),
                return_convergence_delta=True,
            )
            rows.append(attrs.sum(dim=-1)[0].detach().float().cpu().numpy())  # (T,)
            deltas.append(float(delta.reshape(-1)[0]))
    return ClsPath(
        info=s.info,
        layer_names=_layer_names(n_layers),
        scores=np.stack(rows),  # (L + 1, T)
        deltas=np.asarray(deltas, dtype=np.float32),
        target=lm.labels[s.target_idx],
        f_x=s.f_x,
        f_baseline=s.f_b,
        n_steps=int(n_steps),
        baseline=path_baseline,
    )


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, MemoryError)) and ("out of memory" in text or "can't allocate memory" in text
                                                              or "not enough memory" in text or isinstance(exc, MemoryError))


def _ig_retrying(ig, inputs, internal_batch_size: int, **kwargs):
    """``ig.attribute`` that halves its internal batch on out-of-memory and tries again; at a batch
    of one it gives up with a ResourceError (a clear message) instead of taking the server down."""
    batch = max(1, int(internal_batch_size))
    while True:
        try:
            return ig.attribute(inputs, internal_batch_size=batch, **kwargs)
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


def _from_depth(s: _Setup, depth: int):
    """f(hidden state after ``depth``) -> class outputs: the encoder layers above, pooler, classifier.
    One unpadded sequence, so no attention mask is needed."""
    model = s.model

    def forward(hidden):  # (B, T, D)
        for layer in model.bert.encoder.layer[depth:]:
            hidden = layer(hidden)  # (B, T, D)
        pooled = model.bert.pooler(hidden)  # (B, D): tanh(W h_CLS + b)
        return s.head(model.classifier(model.dropout(pooled)))  # (B, C)

    return forward


def _layer_names(n_layers: int) -> tuple[str, ...]:
    return ("embeddings", *(f"layer {i}" for i in range(1, n_layers + 1)))


def cls_lens(lm: LoadedModel, text: str, pair: str | None = None) -> ClsLens:
    """Class probabilities from each depth's [CLS] hidden state through pooler + classifier."""
    inputs, _ = encode(lm, text, pair)
    model = lm.model
    with lm.run_lock, torch.inference_mode():
        out = model.bert(**inputs, output_hidden_states=True)
        cls = torch.stack([h[0, 0] for h in out.hidden_states])  # (L + 1, D)
        pooled = model.bert.pooler.activation(model.bert.pooler.dense(cls))  # (L + 1, D): tanh(W h + b)
        logits = model.classifier(pooled).float()  # (L + 1, C)
        probs = torch.sigmoid(logits) if lm.multi_label else torch.softmax(logits, dim=-1)
    return ClsLens(layer_names=_layer_names(len(out.hidden_states) - 1), labels=lm.labels, probs=probs.cpu().numpy())
