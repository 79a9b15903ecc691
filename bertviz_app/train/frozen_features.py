"""Training above a frozen bottom on features computed once (a tagger's run and a classifier's).

With ``TrainConfig.freeze_layers = k`` the embeddings and the bottom ``k`` encoder layers never change, so what they
make of a text (``hidden_states[k]``) is the same at every step of every epoch. A run can then compute it once per
text and train the layers above on it (``models.forward.logits_from_depth``): after that first pass, no forward
pass through the frozen layers and, as with any frozen layer, no backward pass through them. What differs from
running the whole model with those layers frozen: the frozen layers run in eval mode, as a feature extractor, so
their dropout is off (the layers that train keep theirs).

It does not apply, and the run goes through the whole model with the layers frozen (``feature_depth`` says why):
- when a parameter that the bottom's output depends on still trains (found by a probe, ``bottom_parameters``):
  ALBERT's layers share one set of weights, so its bottom layers train with the top ones;
- training on several processes (the Trainer wraps the model for them, and each would hold its own features);
- features that would take more than ``budget`` bytes (float32: tokens x the encoder's width).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..models.encoding import pad_rows
from ..models.families import family_of
from ..models.forward import hidden_at_depth

__all__ = ["FEATURE_BUDGET", "FeatureCollator", "add_features", "bottom_parameters", "feature_depth", "FrozenRun",
           "frozen_run", "frozen_notice"]

FEATURE_BUDGET = 1 << 30  # bytes of features a run may hold: 1 GiB, about 900k tokens of a 6-layer MiniLM's


def feature_depth(model, freeze_layers: int, n_tokens: int, probe_ids: Sequence[int], *, world_size: int = 1,
                  budget: int = FEATURE_BUDGET) -> tuple[int, str]:
    """(depth, why): the number of bottom layers whose output the run computes once (0: none; train through the
    whole model) and a line that says what was decided and why. ``n_tokens``: the word-pieces of every sentence the
    run reads (training and validation); ``probe_ids``: one of them, whose output at that depth shows which
    parameters it depends on (``bottom_parameters``): every one must be frozen."""
    if freeze_layers <= 0:
        return 0, "no frozen layers"
    fam = family_of(model)
    if fam is None:
        return 0, "an unknown model type: its layers cannot be run from a depth"
    training = [name for name, p in bottom_parameters(model, freeze_layers, probe_ids) if p.requires_grad]
    if training:
        shared = " (its layers share one set of weights)" if fam.name == "ALBERT" else ""
        return 0, (f"the output of the embeddings and layers 0-{freeze_layers - 1} depends on {len(training):,} "
                   f"parameters that train{shared}, e.g. {training[0]}")
    if world_size > 1:
        return 0, f"training on {world_size} processes"
    size = int(n_tokens) * int(model.config.hidden_size) * 4
    if size > budget:
        return 0, (f"the features would take {size / 2**20:,.0f} MiB, more than the {budget / 2**20:,.0f} MiB "
                   "allowed")
    return freeze_layers, (f"computed once per text ({size / 2**20:,.1f} MiB), and the layers above trained on "
                           "it")


def bottom_parameters(model, depth: int, probe_ids: Sequence[int]) -> list[tuple[str, torch.nn.Parameter]]:
    """The (name, parameter) pairs that ``hidden_states[depth]`` depends on: those in the autograd graph of the
    model's output at that depth for ``probe_ids`` (one sentence), every parameter made to require a gradient for
    the probe and set back after it. Shared weights (ALBERT) and parts outside the layers (DeBERTa's convolution
    after layer 0) are found as they are used, not from their names."""
    params = list(model.named_parameters())
    flags = [p.requires_grad for _, p in params]
    was_training = model.training
    model.eval()
    try:
        for _, p in params:
            p.requires_grad_(True)
        ids = torch.as_tensor([list(probe_ids)], device=params[0][1].device)  # (1, T)
        hidden = hidden_at_depth(model, ids, torch.ones_like(ids), depth=depth)  # (1, T, D)
        grads = torch.autograd.grad(hidden.sum(), [p for _, p in params], allow_unused=True)
    finally:
        for (_, p), flag in zip(params, flags):
            p.requires_grad_(flag)
        model.train(was_training)
    return [(name, p) for (name, p), g in zip(params, grads) if g is not None]


@torch.no_grad()
def add_features(model, tokenizer, rows: Sequence[dict], depth: int, batch_size: int = 64) -> list[dict]:
    """``rows`` (``input_ids``, ``attention_mask``, ``labels``, a pair's ``token_type_ids``...) each with ``hidden``:
    its (T, D) float32 output of the embeddings and the bottom ``depth`` layers, computed on the model's device in
    eval mode (no dropout), texts batched by length so a batch pads little (``encoding.pad_rows``, on the right),
    and kept on the CPU. The model's mode is restored."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = [dict(r) for r in rows]
    keys = [k for k in ("input_ids", "token_type_ids") if out and k in out[0]]
    columns = {k: [r[k] for r in out] for k in keys}
    order = sorted(range(len(out)), key=lambda i: len(out[i]["input_ids"]))
    try:
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = pad_rows(tokenizer, columns, chunk, keys, "right")  # (B, T) each
            lengths = torch.tensor([len(out[i]["input_ids"]) for i in chunk])  # (B,)
            mask = (torch.arange(batch["input_ids"].shape[1]) < lengths[:, None]).long()  # (B, T) 1 on the text
            types = batch.get("token_type_ids")
            hidden = hidden_at_depth(model, batch["input_ids"].to(device), mask.to(device),
                                     None if types is None else types.to(device), depth=depth).float().cpu()
            for j, i in enumerate(chunk):
                out[i]["hidden"] = hidden[j, :len(out[i]["input_ids"])].clone()  # (T_i, D)
    finally:
        model.train(was_training)
    return out


@dataclass
class FrozenRun:
    """What ``frozen_run`` decided: the rows to train and validate on, the collator that batches them (None: the
    caller's own), the depth the features were taken at (0: none) and why."""

    train: list[dict]
    eval: list[dict]
    collator: FeatureCollator | None
    depth: int
    why: str


def frozen_run(model, tokenizer, freeze_layers: int, train: Sequence[dict], eval_rows: Sequence[dict], *,
               world_size: int = 1, budget: int = FEATURE_BUDGET, per_token: bool = True) -> FrozenRun:
    """The rows a run trains on: with the features when ``feature_depth`` allows (computed on the GPU when there is
    one, where the Trainer will train), else as given. ``per_token``: labels per token (a tagger) or per row."""
    if freeze_layers <= 0 or not train:
        return FrozenRun(list(train), list(eval_rows), None, 0, "no frozen layers" if freeze_layers <= 0 else
                         "no training rows")
    n_tokens = sum(len(r["input_ids"]) for r in [*train, *eval_rows])
    depth, why = feature_depth(model, freeze_layers, n_tokens, train[0]["input_ids"], world_size=world_size,
                               budget=budget)
    if not depth:
        return FrozenRun(list(train), list(eval_rows), None, 0, why)
    if torch.cuda.is_available():
        model.to("cuda")
    return FrozenRun(add_features(model, tokenizer, train, depth), add_features(model, tokenizer, eval_rows, depth),
                     FeatureCollator(per_token=per_token), depth, why)


def frozen_notice(info: dict) -> str | None:
    """A run's note on its frozen layers (``info``: the trainer's, with ``config`` and ``frozen_features``), None when
    none was frozen."""
    k = int(info.get("config", {}).get("freeze_layers") or 0)
    frozen = info.get("frozen_features") or {}
    if not k:
        return None
    head = f"The embeddings and layers 0-{k - 1} were frozen; "
    if frozen.get("depth"):
        return head + f"their output was {frozen['why']}."
    return head + f"each step ran through them, as their output could not be computed once: {frozen.get('why')}."


class FeatureCollator:
    """A batch of rows with features: ``hidden`` (B, T, D) padded with zeros, ``attention_mask`` (B, T) with 0 and
    ``labels``: per token (``per_token``, a tagger's) (B, T) padded with ``label_pad`` (the loss skips it), else one
    per row as given (a class index (B,), a multi-label row of floats (B, C)); the rows' other keys (``input_ids``:
    the length the sampler groups by) are left out."""

    def __init__(self, label_pad: int = -100, per_token: bool = True):
        self.label_pad, self.per_token = label_pad, per_token

    def __call__(self, rows: Sequence[dict]) -> dict:
        width = max(r["hidden"].shape[0] for r in rows)
        dim = rows[0]["hidden"].shape[1]
        hidden = torch.zeros(len(rows), width, dim, dtype=rows[0]["hidden"].dtype)  # (B, T, D)
        mask = torch.zeros(len(rows), width, dtype=torch.long)  # (B, T)
        batch = {"hidden": hidden, "attention_mask": mask}
        if "labels" in rows[0] and not self.per_token:
            batch["labels"] = torch.as_tensor([r["labels"] for r in rows])  # (B,) long or (B, C) float
        elif "labels" in rows[0]:
            batch["labels"] = torch.full((len(rows), width), self.label_pad, dtype=torch.long)  # (B, T)
        for j, r in enumerate(rows):
            n = r["hidden"].shape[0]
            hidden[j, :n] = r["hidden"]
            mask[j, :n] = 1
            if "labels" in batch and self.per_token:
                batch["labels"][j, :n] = torch.as_tensor(r["labels"])
        return batch
