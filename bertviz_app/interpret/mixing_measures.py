"""Context-mixing measures: how much each input token contributes to each token's representation,
layer by layer, beside raw attention weights.

Raw attention says where a head looks, not what it takes: value vectors differ in size, and the
residual path and LayerNorm mix in the token itself. The measures here:

- ``raw``: the attention weights alpha_ij (per head; heads combined by their mean), aggregated by
  rollout with the residual as 0.5 I (Abnar & Zuidema 2020).
- ``norm``: attention-norm ||alpha_ij f(x_j)|| (Kobayashi et al., EMNLP 2020), f(x) = the head's value
  vector through its slice of the output projection; per head, and ||sum_h alpha^h_ij f^h(x_j)|| for the
  layer (rows normalised to sum to 1 for the combined and aggregated views).
- ``value_zeroing``: (Mohebbi et al., EACL 2023) token j's value vector zeroed in layer l, the cosine
  distance of every token's layer output from the original, rows normalised to sum to 1.
- ``alti``: (Ferrando et al., EMNLP 2022) each layer's attention-block output decomposed exactly into
  per-input-token pieces through attention, residual and LayerNorm; contributions from L1 distances.

Every measure gives, for one input: ``weights`` (L, H, T, T) per head (H = 1 where the measure is per
layer), ``combined`` (L, T, T) per layer, ``aggregated`` (L, T, T) across layers (rollout-style: the
product of the per-layer matrices up to l), and the [CLS] row of the last aggregated layer as a token
ranking (``cls_scores``).

Exact where the papers say so: norm's vectors alpha^h_ij f^h(x_j) summed over j and heads, plus the
dense bias, are the attention block's output before the residual; ALTI's pieces T_i(x_j) plus the bias
term add up to the block's LayerNorm output (tests check both against the model's own modules).

Every measure runs on the float32 model under ``lm.run_lock``; the per-layer inputs are the model's
own ``hidden_states`` and the attention probabilities its own ``attentions`` (models load with eager
attention), so the families share one path and DeBERTa's disentangled attention needs nothing special.
``context_mixing`` (text in, memoised) checks and encodes; ``context_mixing_inputs`` takes one encoded
input (no padding) for callers that have tokenised already (the comparison, long-document windows).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import InputError
from ..models.encoding import encode
from ..models.families import MixingParts, family_of
from ..results import TokenInfo
from .attention_maps import rollout

__all__ = ["MEASURES", "MEASURE_NOTES", "MixingMaps", "context_mixing", "check_measure", "supported_measures",
           "context_mixing_inputs", "decompose_layer", "LayerDecomposition", "value_zeroing_chunk",
           "value_zeroing_distances"]

MEASURES = ("raw", "norm", "value_zeroing", "alti")

# One line each: what the measure is and why it differs from raw attention (the page shows it).
MEASURE_NOTES = {
    "raw": "Raw attention weights: where each head looks, not how much it takes from there.",
    "norm": "Attention-norm (Kobayashi et al. 2020): weight x size of the transformed value vector, so a "
            "token looked at but carrying a small vector counts little.",
    "value_zeroing": "Value zeroing (Mohebbi et al. 2023): how much each token's layer output changes when "
                     "one token's value vector is zeroed; includes the residual path and feed-forward.",
    "alti": "ALTI (Ferrando et al. 2022): each layer's output split exactly into per-token pieces through "
            "attention, residual and LayerNorm; a piece counts by how close it is to the whole.",
}


@dataclass(frozen=True, eq=False)
class MixingMaps:
    """One context-mixing measure over the real tokens of one input."""

    info: TokenInfo
    measure: str
    weights: np.ndarray  # (L, H, T, T) float32; H = 1 for per-layer measures (value_zeroing, alti)
    combined: np.ndarray  # (L, T, T) per layer, heads combined; rows sum to 1
    aggregated: np.ndarray  # (L, T, T) across layers up to l; rows sum to 1
    seconds: float = 0.0

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.info.tokens

    @property
    def num_layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def num_heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def cls_scores(self) -> np.ndarray:
        """(T,) what the last layer's [CLS] takes from each input token, aggregated across layers."""
        return self.aggregated[-1, 0]

    def to_dict(self) -> dict:
        r = lambda a: np.round(a, 6).tolist()  # noqa: E731
        return {"tokens": list(self.tokens), "measure": self.measure, "weights": r(self.weights),
                "combined": r(self.combined), "aggregated": r(self.aggregated), "cls_scores": r(self.cls_scores),
                "seconds": round(float(self.seconds), 4)}


# Value zeroing runs copies of one layer's input, one per zeroed token, in chunks of at most this many
# floats of activations (hidden, feed-forward and attention scores of the copies): ~256 MB.
VZ_CHUNK_FLOATS = 1 << 26
# Norm and ALTI build the (rows, T, D) vectors alpha_ij f(x_j) a block of query rows at a time.
ROW_CHUNK_FLOATS = 1 << 24

def _family(lm):
    """The model's family when its layers can be decomposed. The head asks (``Head.composable``): BERT's and
    ALBERT's own check also wants the pooler a sequence head reads, which a tagger lacks though its layers are the
    same."""
    fam = family_of(lm.model)
    return fam if fam is not None and lm.head.composable(fam, lm.model) else None


def supported_measures(lm) -> tuple[str, ...]:
    """The measures this model's family supports (all four for every supported family unless the
    family's layer cannot be decomposed)."""
    return MEASURES if _family(lm) is not None else ("raw",)


def check_measure(lm, measure: str) -> str:
    """``measure`` if known and supported for ``lm``'s family; InputError otherwise: an unknown name
    lists the valid ones, an unsupported one says why and which measures work."""
    if not isinstance(measure, str) or measure.strip().lower().replace("-", "_") not in MEASURES:
        raise InputError(f"Unknown measure {measure!r}: choose one of {', '.join(MEASURES)}.")
    measure = measure.strip().lower().replace("-", "_")
    works = supported_measures(lm)
    if measure not in works:
        kind = getattr(lm.model.config, "model_type", "this")
        raise InputError(f"The measure {measure!r} needs the layers' value, output projection and LayerNorm, which "
                         f"this tool cannot locate in a {kind!r} model; measures that work here: {', '.join(works)}.")
    return measure


def context_mixing(lm, text: str, pair: str | None = None, measure: str = "raw") -> MixingMaps:
    """The measure over one input (checked like ``attention``); kept in the model's LRU."""
    measure = check_measure(lm, measure)
    inputs, info = encode(lm, text, pair)
    return lm.memo(("context_mixing", measure, info.text, info.pair),
                   lambda: context_mixing_inputs(lm, inputs, measure, info))


def _check_tokens(lm, input_ids: torch.Tensor) -> None:
    """Refuse an input whose tokens besides [CLS]/[SEP] (and the like) hold no visible character:
    "[CLS] [SEP]" typed as text (the tokenizer reads them as the special tokens), control or
    zero-width characters that tokenise to nothing, or to a bare word-start piece ("Ġ", "▁"). [UNK]
    is text (an emoji the vocabulary lacks is still what the reader typed), as the page's Analyze
    check (``encoding.check_has_words``) counts it, so a text the page analyses has every measure."""
    special = set(lm.tokenizer.all_special_ids) - {lm.tokenizer.unk_token_id}
    ids = [int(i) for i in input_ids.reshape(-1).tolist() if int(i) not in special]
    shown = lm.tokenizer.decode(ids) if ids else ""
    if not any(ch.isprintable() and not ch.isspace() for ch in shown):
        raise InputError("The text holds nothing but the model's special tokens ([CLS], [SEP] and the like), "
                         "spaces or invisible characters once tokenised: enter words to analyse.")


def _token_info(lm, input_ids: torch.Tensor) -> TokenInfo:
    tokens = tuple(lm.tokenizer.convert_ids_to_tokens(input_ids.reshape(-1).tolist()))
    special = set(lm.tokenizer.all_special_ids)
    seq = tuple(None if int(i) in special else 0 for i in input_ids.reshape(-1).tolist())
    return TokenInfo(tokens=tokens, offsets=((0, 0),) * len(tokens), sequence_ids=seq, text="", pair=None,
                     truncated=False)


def _one_input(inputs: dict) -> dict:
    ids = inputs["input_ids"]
    if ids.dim() == 1:
        inputs = {k: v.unsqueeze(0) for k, v in inputs.items()}
    if inputs["input_ids"].shape[0] != 1:
        raise ValueError("context_mixing_inputs takes one input (batch of 1)")
    mask = inputs.get("attention_mask")
    if mask is not None and not bool(mask.bool().all()):
        raise ValueError("context_mixing_inputs takes an unpadded input (attention_mask all ones)")
    return inputs


def context_mixing_inputs(lm, inputs: dict, measure: str = "raw", info: TokenInfo | None = None) -> MixingMaps:
    """The measure over one already-encoded input: ``inputs`` holds ``input_ids`` (and optionally
    ``attention_mask``, ``token_type_ids``) of ONE input, (1, T) or (T,), without padding. ``info``
    describes its tokens (made from the ids when None). Not memoised: callers keep what they need."""
    measure = check_measure(lm, measure)
    inputs = _one_input(inputs)
    _check_tokens(lm, inputs["input_ids"])
    if info is None:
        info = _token_info(lm, inputs["input_ids"])
    t0 = time.perf_counter()
    model = lm.fp32_model()
    fam = family_of(model)
    kw = {k: v.to(lm.device) for k, v in inputs.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    if fam is not None:
        kw = fam.inputs(**kw)
    with lm.run_lock, torch.inference_mode():
        hidden, attn = _forward(model, kw)  # (L + 1, T, D), (L, H, T, T)
        if measure == "raw":
            weights = attn.float().cpu().numpy()
            combined = weights.mean(axis=1)
            aggregated = rollout(weights)
        elif measure == "norm":
            weights, combined = _norm(fam, model, hidden, attn)
            aggregated = rollout(combined[:, None])  # the same 0.5 I residual mixing as raw
        elif measure == "alti":
            combined = _alti(fam, model, hidden, attn)
            weights, aggregated = combined[:, None], _product_rollout(combined)
        else:
            combined = _value_zeroing(fam, model, hidden, attn)
            weights, aggregated = combined[:, None], _product_rollout(combined)
    return MixingMaps(info=info, measure=measure, weights=weights.astype(np.float32),
                      combined=combined.astype(np.float32), aggregated=aggregated.astype(np.float32),
                      seconds=time.perf_counter() - t0)


def _forward(model, kw: dict) -> tuple[torch.Tensor, torch.Tensor]:
    out = model(**kw, output_hidden_states=True, output_attentions=True)
    if not out.attentions or out.attentions[0] is None:
        raise RuntimeError("The model returned no attention maps; it must be loaded with attn_implementation='eager'.")
    hidden = torch.stack([h[0] for h in out.hidden_states]).float()  # (L + 1, T, D)
    attn = torch.stack([a[0] for a in out.attentions]).float()  # (L, H, T, T)
    return hidden, attn


def _normalise_rows(m: np.ndarray) -> np.ndarray:
    """Rows scaled to sum to 1; a row of zeros (nothing measured) becomes the identity's row."""
    m = np.clip(m.astype(np.float64), 0.0, None)
    s = m.sum(axis=-1, keepdims=True)  # (..., T, 1)
    eye = np.broadcast_to(np.eye(m.shape[-1]), m.shape)
    return np.where(s > 0, m / np.where(s > 0, s, 1.0), eye)


def _product_rollout(per_layer: np.ndarray) -> np.ndarray:
    """(L, T, T) -> (L, T, T): entry l = per_layer[l] @ ... @ per_layer[0] (no residual added: the
    measure already includes it). Rows of row-stochastic matrices stay summing to 1."""
    out = np.empty_like(per_layer, dtype=np.float64)
    joint = np.eye(per_layer.shape[-1])
    for layer in range(per_layer.shape[0]):
        joint = per_layer[layer].astype(np.float64) @ joint
        out[layer] = joint
    return out


# -- norm and ALTI: the attention block decomposed per input token ---------------------------------

def _values(parts: MixingParts, x: torch.Tensor) -> torch.Tensor:
    """The value vectors W_V^h x_j + b_V^h of every token and head: (T, H, d). From the model's own value
    module, called as the model calls it, so whatever runs on it (a hook zeroing a token) counts."""
    return parts.value(x[None])[0].view(x.shape[0], parts.heads, parts.head_size)


def _transformed(parts: MixingParts, v: torch.Tensor) -> torch.Tensor:
    """f^h(x_j) = (W_V^h x_j + b_V^h) W_O^h for every head and token: (H, T, D)."""
    w = parts.out.weight.view(-1, parts.heads, parts.head_size)  # (D, H, d): head h's slice W_O^h
    return torch.einsum("thd,ehd->hte", v, w)  # (H, T, D)


def _blocks(t: int, per_item: int, budget: int):
    step = max(1, budget // max(1, per_item))
    for start in range(0, t, step):
        yield slice(start, min(t, start + step))


def _row_blocks(t: int, d: int):
    return _blocks(t, t * d, ROW_CHUNK_FLOATS)


def _by_token(a: torch.Tensor, x: torch.Tensor, cols: slice) -> torch.Tensor:
    """sum_h a^h_ij x^h_j for every query i and the tokens j in ``cols``, token-major: (C, T, E) from
    the weights a (H, T, T) and per-head vectors x (H, T, E). One batched matrix product over the
    tokens j, each (T x H) @ (H x E); the T^2 E outputs are written once (no (T, T, H, E) product)."""
    w = a[:, :, cols].permute(2, 1, 0).contiguous()  # (C, T, H): column j of every head
    return torch.bmm(w, x[:, cols].transpose(0, 1).contiguous())  # (C, T, E)


def _mixed(f: torch.Tensor, a: torch.Tensor, rows: slice) -> torch.Tensor:
    """sum_h alpha^h_ij f^h(x_j) for the query rows ``rows``: (R, T, D) (a view, token-major in memory),
    from f (H, T, D) and alpha (H, T, T)."""
    return _by_token(a[:, rows], f, slice(None)).transpose(0, 1)  # (R, T, D)


def _norm(fam, model, hidden, attn) -> tuple[np.ndarray, np.ndarray]:
    """Kobayashi et al. 2020: per head ||alpha^h_ij f^h(x_j)|| (L, H, T, T); per layer
    ||sum_h alpha^h_ij f^h(x_j)|| with rows normalised to 1 (L, T, T)."""
    n_layers, n_heads, t, _ = attn.shape
    heads = torch.empty((n_layers, n_heads, t, t), dtype=attn.dtype)
    layer_norms = torch.empty((n_layers, t, t), dtype=attn.dtype)
    for i, layer in enumerate(fam.layers(model)):
        parts = fam.mixing_parts(layer)
        f = _transformed(parts, _values(parts, hidden[i]))  # (H, T, D)
        a = attn[i]  # (H, T, T)
        heads[i] = (a * f.norm(dim=-1)[:, None, :]).cpu()  # alpha scales f: ||a f|| = a ||f||
        for cols in _row_blocks(t, hidden.shape[-1]):
            layer_norms[i, :, cols] = _by_token(a, f, cols).norm(dim=-1).T.cpu()  # (T, C)
    return heads.double().numpy(), _normalise_rows(layer_norms.numpy())


def _ln_input(parts: MixingParts, x: torch.Tensor, f: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """What the attention block's LayerNorm reads: x_i + sum_j sum_h alpha^h_ij f^h(x_j) + b_O, (T, D)."""
    b_o = parts.out.bias if parts.out.bias is not None else torch.zeros_like(x[0])
    return x + torch.bmm(a, f).sum(dim=0) + b_o


def _alti_block(parts: MixingParts, x: torch.Tensor, f: torch.Tensor, a: torch.Tensor, rows: slice,
                pre: torch.Tensor):
    """ALTI's decomposition of the attention block's output for the query rows ``rows``:

        y_i = LN(x_i + sum_j alpha_ij f(x_j) + b_O) = sum_j T_i(x_j) + bias_i

    with t_ij = sum_h alpha^h_ij f^h(x_j) (+ x_i where j == i: the residual is token i's own piece),
    LayerNorm linearised by the whole sum's standard deviation sigma_i (exactly what LN divides by),
    T_i(x_j) = gamma * (t_ij - mean(t_ij)) / sigma_i and bias_i = gamma * (b_O - mean(b_O)) / sigma_i + beta.

    Where the biases go, as in the paper's code (mt-upc/transformer-contributions, ``get_contributions``):
    the value bias b_V is inside f(x_j) (each token's value vector carries it, weighted by alpha_ij),
    the dense bias b_O and LN's beta go to bias_i and to no token; y_i (with the bias) is what the
    distances are measured from. Unlike that code, sigma_i is LayerNorm's own (biased variance + eps)
    so the pieces add back to the block's output exactly. ``pre``: what LayerNorm reads (``_ln_input``).
    Returns (pieces (R, T, D), bias (R, D), y (R, D)), y = gamma * (pre - mean(pre)) / sigma + beta,
    which is the sum of the pieces and the bias."""
    r = torch.arange(rows.start, rows.stop, device=x.device)
    pieces = _mixed(f, a, rows)  # (R, T, D)
    pieces[torch.arange(len(r)), r] += x[r]  # the residual
    b_o = parts.out.bias if parts.out.bias is not None else torch.zeros_like(x[0])
    pre = pre[rows]  # (R, D)
    sigma = torch.sqrt(pre.var(dim=-1, unbiased=False, keepdim=True) + parts.norm.eps)  # (R, 1)
    gamma = parts.norm.weight if parts.norm.weight is not None else torch.ones_like(b_o)
    beta = parts.norm.bias if parts.norm.bias is not None else torch.zeros_like(b_o)
    scale = gamma / sigma  # (R, D)
    pieces = pieces.sub_(pieces.mean(dim=-1, keepdim=True)).mul_(scale[:, None])  # (R, T, D)
    bias = scale * (b_o - b_o.mean()) + beta  # (R, D)
    return pieces, bias, scale * (pre - pre.mean(dim=-1, keepdim=True)) + beta


def _alti(fam, model, hidden, attn) -> np.ndarray:
    """Ferrando et al. 2022: c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows normalised: (L, T, T)."""
    n_layers, _, t, _ = attn.shape
    out = torch.empty((n_layers, t, t), dtype=attn.dtype)
    for i, layer in enumerate(fam.layers(model)):
        parts = fam.mixing_parts(layer)
        f = _transformed(parts, _values(parts, hidden[i]))  # (H, T, D)
        pre = _ln_input(parts, hidden[i], f, attn[i])  # (T, D)
        for rows in _row_blocks(t, hidden.shape[-1]):
            pieces, _, y = _alti_block(parts, hidden[i], f, attn[i], rows, pre)
            rest = torch.sub(y[:, None], pieces, out=pieces)  # (R, T, D): y_i - T_i(x_j), in place
            c = y.abs().sum(-1, keepdim=True) - torch.linalg.vector_norm(rest, ord=1, dim=-1)  # (R, T)
            out[i, rows] = c.clamp(min=0).cpu()
    return _normalise_rows(out.numpy())


@dataclass(frozen=True, eq=False)
class LayerDecomposition:
    """One layer's attention block split per input token (what norm and ALTI measure), for checking
    and inspection: ``mixed[i, j]`` = sum_h alpha^h_ij f^h(x_j), so ``mixed.sum(1) + out_bias`` is the
    block's output before the residual and LayerNorm; ``pieces[i, j]`` = T_i(x_j), so
    ``pieces.sum(1) + bias`` is the block's output after LayerNorm."""

    mixed: np.ndarray  # (T, T, D)
    out_bias: np.ndarray  # (D,)
    pieces: np.ndarray  # (T, T, D)
    bias: np.ndarray  # (T, D)


def decompose_layer(lm, inputs: dict, layer: int) -> LayerDecomposition:
    """Norm's and ALTI's per-token vectors of layer ``layer`` (0-based) for one encoded input
    (T x T x D floats: for short inputs)."""
    inputs = _one_input(inputs)
    model = lm.fp32_model()
    fam = family_of(model)
    kw = fam.inputs(**{k: v.to(lm.device) for k, v in inputs.items()
                       if k in ("input_ids", "attention_mask", "token_type_ids")})
    with lm.run_lock, torch.inference_mode():
        hidden, attn = _forward(model, kw)
        parts = fam.mixing_parts(fam.layers(model)[layer])
        f = _transformed(parts, _values(parts, hidden[layer]))
        rows = slice(0, hidden.shape[1])
        mixed = _mixed(f, attn[layer], rows)
        pieces, bias, _ = _alti_block(parts, hidden[layer], f, attn[layer], rows,
                                      _ln_input(parts, hidden[layer], f, attn[layer]))
        b_o = parts.out.bias if parts.out.bias is not None else torch.zeros_like(hidden[0, 0])
        return LayerDecomposition(mixed=mixed.cpu().numpy(), out_bias=b_o.float().cpu().numpy(),
                                  pieces=pieces.cpu().numpy(), bias=bias.cpu().numpy())


# -- value zeroing ------------------------------------------------------------------------------

def value_zeroing_chunk(t: int, d: int, heads: int, ffn: int) -> int:
    """How many zeroed tokens (copies of a T-token layer) one batched step takes, so its activations
    stay within ``VZ_CHUNK_FLOATS``: per copy and token the removed vector, the LayerNorm input and
    output, the feed-forward's inner vectors (removed part, input, activation), its output, the sum
    and the layer output, and the attention column."""
    per_copy = t * (6 * d + 3 * ffn + heads)
    return int(max(1, min(t, VZ_CHUNK_FLOATS // max(1, per_copy))))


def _cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """1 - cos(a, b) over the last axis, as ||a/|a| - b/|b|||^2 / 2: the same number, but computed from
    the difference, so it stays accurate when a and b are nearly parallel (1 - cos in float32 is noise
    below ~1e-7, and zeroing one token's value often moves a layer's output by about that much)."""
    a = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    b = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    return 0.5 * (a - b).pow(2).sum(dim=-1)


def _centre(v: torch.Tensor) -> torch.Tensor:
    return v - v.mean(dim=-1, keepdim=True)


def value_zeroing_distances(model, hidden: torch.Tensor, attn: torch.Tensor) -> np.ndarray:
    """Mohebbi et al. 2023, before rows are normalised: C[l, i, j] = cosine distance between token i's
    output of layer l and the same with token j's value vector zeroed in every head of layer l: (L, T, T)
    float64, for a model of a supported family (any float dtype) from its own ``hidden_states``
    (L + 1, T, D) and ``attentions`` (L, H, T, T) of one unpadded input.

    Exact without re-running attention: zeroing v_j removes m_ij = sum_h alpha^h_ij f^h(x_j) (norm's
    and ALTI's vectors, the value bias inside f) from the attention output of every query i and
    changes nothing else, so copy j's layer output is the layer's tail (residual + LayerNorm, then
    the feed-forward) on s_i - m_ij, s_i = x_i + sum_k m_ik + b_O being what the LayerNorm reads.
    The feed-forward's first linear layer is affine in the LayerNorm's centred input, so with
    A = W_1 diag(gamma) it reads (A c(s_i) - sum_h alpha^h_ij A c(f^h(x_j))) / sigma_ij + W_1 beta + b_1
    (c: minus the mean over D; sigma_ij the copy's own LayerNorm scale): A is applied to T + H T
    vectors per layer instead of T^2; the activation, second linear layer and LayerNorm (and
    DeBERTa's layer-0 convolution) run on every (copy, token) pair through the family's own modules
    (``Family.feed_forward``), a chunk of copies at a time (``value_zeroing_chunk``)."""
    fam = family_of(model)
    layers = fam.layers(model)
    out = np.empty((len(layers), hidden.shape[1], hidden.shape[1]), dtype=np.float64)
    for i in range(len(layers)):
        out[i] = _layer_value_zeroing(fam, model, i, hidden[i], attn[i].to(hidden.dtype))
    return out


def _layer_value_zeroing(fam, model, index: int, x: torch.Tensor, a: torch.Tensor) -> np.ndarray:
    """Layer ``index``'s value-zeroing distances (T, T) from its input x (T, D) and attention a (H, T, T)."""
    layer = fam.layers(model)[index]
    parts, lin1 = fam.mixing_parts(layer), fam.ffn_in(layer)
    norm = parts.norm
    t, d = x.shape
    f = _transformed(parts, _values(parts, x))  # (H, T, D)
    gamma = norm.weight if norm.weight is not None else torch.ones_like(x[0])
    beta = norm.bias if norm.bias is not None else torch.zeros_like(x[0])
    s = _ln_input(parts, x, f, a)  # (T, D): the LayerNorm's input, nothing zeroed
    w1 = lin1.weight * gamma  # (F, D): A
    inner0 = lin1.weight @ beta + (lin1.bias if lin1.bias is not None else 0.0)  # (F,)
    p = _centre(s) @ w1.T  # (T, F)
    ft = f.transpose(0, 1).contiguous()  # (T, H, D): token-major, so a chunk of tokens is one slice
    gt = _centre(ft) @ w1.T  # (T, H, F): A c(f^h(x_j))

    def tail(w: torch.Tensor, cols: slice) -> torch.Tensor:
        """Layer outputs (C, T, D) with sum_h w[k, i, h] f^h(x_j) (j = the k-th token of ``cols``) taken
        from the LayerNorm's input of query i."""
        z = torch.baddbmm(s, w, ft[cols], alpha=-1.0)  # (C, T, D): s_i - m_ij
        h, _, rstd = torch.native_layer_norm(z, (d,), norm.weight, norm.bias, norm.eps)  # LN(z), 1 / sigma
        inner = torch.baddbmm(p, w, gt[cols], alpha=-1.0).mul_(rstd).add_(inner0)  # (C, T, F): lin1(LN(z))
        return fam.feed_forward(model, index, h, x.expand(z.shape), inner=inner)

    base = tail(torch.zeros((1, t, a.shape[0]), dtype=x.dtype, device=x.device), slice(0, 1))[0]  # (T, D)
    out = np.empty((t, t), dtype=np.float64)
    for js in _blocks(t, 1, value_zeroing_chunk(t, d, parts.heads, lin1.out_features)):
        w = a[:, :, js].permute(2, 1, 0).contiguous()  # (C, T, H): alpha^h_ij for the zeroed tokens j
        y = tail(w, js)  # (C, T, D): copy k zeroes token js[k]
        out[:, js] = _cosine_distance(y, base[None]).T.double().cpu().numpy()  # (T, C): token i, copy k
    return out


def _value_zeroing(fam, model, hidden, attn) -> np.ndarray:
    """Value zeroing's per-layer matrices, rows normalised to 1: (L, T, T)."""
    return _normalise_rows(value_zeroing_distances(model, hidden, attn))
