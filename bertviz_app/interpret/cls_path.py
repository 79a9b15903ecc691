"""The class evidence layer by layer: ``cls_path`` takes the attribution at the embeddings' output and at every
encoder layer's output (layers x tokens: how the evidence moves into the [CLS] position with depth), and
``cls_lens`` reads class probabilities from each layer's [CLS] state through the model's head (BERT: pooler and
classifier)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from captum.attr import IntegratedGradients

from ..models.encoding import encode
from ..models.families import family_of
from ..models.forward import logits_from_depth
from ..models.registry import LoadedModel
from ..results import ClsLens, ClsPath, TokenInfo
from .attribution_options import (
    TOKEN_BUDGET,
    baseline_ids,
    check_args,
    forward_ids,
    halving_on_oom,
    speed_options,
    target_output,
)

__all__ = ["cls_path", "cls_lens"]


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
    lm: LoadedModel

    def head(self, logits: torch.Tensor) -> torch.Tensor:
        return target_output(self.lm, self.output, logits)

    def forward_ids(self, input_ids, attention_mask, token_type_ids):
        return forward_ids(self.model, self.lm, self.output, input_ids, attention_mask, token_type_ids)


def _setup(lm: LoadedModel, text, pair, target, baseline: str, n_steps: int, output: str) -> _Setup:
    """One text with a token baseline (pad/mask/unk), for ``cls_path``: it has no "zero" baseline."""
    check_args(baseline, n_steps, output, max_n_steps=lm.settings.max_n_steps)
    model = lm.fp32_model()
    inputs, info = encode(lm, text, pair)
    ids = inputs["input_ids"]  # (1, T)
    mask = inputs["attention_mask"]  # (1, T)
    types = inputs.get("token_type_ids", torch.zeros_like(ids))  # (1, T)
    base_ids = baseline_ids(lm, ids, baseline)  # (1, T)
    target_idx = lm.label_index(target)
    s = _Setup(model, info, ids, base_ids, mask, types, -1, 0.0, 0.0,
               max(1, min(n_steps, TOKEN_BUDGET // ids.shape[1])), output, lm)
    with torch.no_grad():
        both = s.forward_ids(torch.cat([ids, base_ids]), mask, types)  # (2, C)
    s.target_idx = int(both[0].argmax()) if target_idx is None else target_idx
    s.f_x, s.f_b = float(both[0, s.target_idx]), float(both[1, s.target_idx])
    return s


def cls_path(
    lm: LoadedModel,
    text: str,
    target: str | int | None = None,
    baseline: str = "pad",
    n_steps: int = 20,
    pair: str | None = None,
    output: str = "prob",
    *,
    cls_only_last_layer: bool | None = None,
) -> ClsPath:
    """Layer Integrated Gradients at the embedding output and every encoder layer's output.

    Row l, column t: how much the hidden state of token t after depth l contributes to the
    target class. At the last layer only [CLS] can contribute (the head reads [CLS] alone),
    so the rows show evidence flowing from the word positions into [CLS]. Each row is its own
    attribution from the same baseline, so each row sums to f(x) - f(baseline) - deltas[l].
    The "zero" baseline is taken as "pad" here (a zero vector has no defined deeper states).

    This is Layer IG computed as Captum IntegratedGradients on each depth's hidden state with a
    forward pass that runs only the layers above it: the same integral as LayerIntegratedGradients
    on that layer (a test checks they agree) at about half the layer passes, with no hooks.
    ``cls_only_last_layer`` (None: the settings') as for ``attribute``; the passes run eager.
    """
    _, cls_only = speed_options(lm, None, cls_only_last_layer)
    key = ("cls_path", text, pair, target, baseline, n_steps, output, cls_only)
    return lm.memo(key, lambda: _cls_path(lm, text, target, baseline, n_steps, pair, output, cls_only))


def _cls_path(lm: LoadedModel, text, target, baseline: str, n_steps: int, pair, output: str,
              cls_only: bool = True) -> ClsPath:
    path_baseline = "pad" if baseline == "zero" else baseline
    with lm.run_lock:
        s = _setup(lm, text, pair, target, path_baseline, n_steps, output)
        fam = family_of(s.model)
        n_layers = len(fam.layers(s.model))
        with torch.no_grad():
            kw = fam.inputs(input_ids=torch.cat([s.ids, s.base_ids]), attention_mask=s.mask.expand(2, -1),
                            token_type_ids=s.types.expand(2, -1), output_hidden_states=True)
            states = fam.base(s.model)(**kw).hidden_states  # L + 1 x (2, T, D)
        rows, deltas = [], []
        for depth in range(n_layers + 1):
            x, b = states[depth][:1], states[depth][1:]  # (1, T, D) input and baseline states at this depth
            ig = IntegratedGradients(_from_depth(s, depth, cls_only))
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


def _ig_retrying(ig, inputs, internal_batch_size: int, **kwargs):
    """``ig.attribute`` with ``halving_on_oom`` on its internal batch."""
    return halving_on_oom(lambda b: ig.attribute(inputs, internal_batch_size=b, **kwargs), internal_batch_size)


def _from_depth(s: _Setup, depth: int, cls_only: bool = True):
    """f(hidden state after ``depth``) -> class outputs: the encoder layers above, pooler, classifier
    (the last layer for [CLS] alone with ``cls_only``). One unpadded sequence, so no attention mask
    is needed."""

    def forward(hidden):  # (B, T, D)
        return s.head(logits_from_depth(s.model, hidden, depth, attention="eager", cls_only=cls_only))  # (B, C)

    return forward


def _layer_names(n_layers: int) -> tuple[str, ...]:
    return ("embeddings", *(f"layer {i}" for i in range(1, n_layers + 1)))


def cls_lens(lm: LoadedModel, text: str, pair: str | None = None) -> ClsLens:
    """Class probabilities from each depth's [CLS] hidden state through the model's head (BERT:
    pooler + classifier; other families: their own head, see ``families.py``)."""
    inputs, _ = encode(lm, text, pair)
    model = lm.model
    fam = family_of(model)
    with lm.run_lock, torch.inference_mode():
        out = fam.base(model)(**fam.inputs(**inputs), output_hidden_states=True)
        cls = torch.stack([h[0, :1] for h in out.hidden_states])  # (L + 1, 1, D): position 0 at each depth
        logits = lm.head.logits(fam, model, cls)  # (L + 1, C), e.g. BERT: classifier(tanh(W h + b))
        probs = lm.head.decode(logits, multi_label=lm.multi_label)  # the model's own softmax, uncalibrated
    return ClsLens(layer_names=_layer_names(len(out.hidden_states) - 1), labels=lm.labels, probs=probs.cpu().numpy())
