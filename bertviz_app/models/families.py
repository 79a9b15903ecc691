"""One small adapter per encoder family: where its parts are, and how its [CLS] path runs.

What a model answers is its head's (``heads.py``): a family names its parts, the sequence classifier's among
them (``head``, ``features``, ``final_linear``, ``head_rows``, ``head_prefixes``), and the head adapter reads them.

Every family supported here is an encoder whose classifier reads the first position ([CLS],
or <s> for RoBERTa-style tokenizers) of the last layer:

    word embeddings -> embeddings (-> projection) = depth 0 -> encoder layers -> head -> logits

An adapter names the word embeddings (what Integrated Gradients varies), the modules whose
outputs are ``hidden_states[1:]`` (``layers``), how to compute depth 0 from ids or word vectors
(``embed``), how to run the layers above a depth (``run``) and the head from the first position
(``head``). The heads:

- BERT:        pooler tanh(W h + b) -> dropout -> classifier
- DistilBERT:  pre_classifier -> ReLU -> dropout -> classifier (takes no token_type_ids)
- RoBERTa, XLM-RoBERTa: classifier.dense -> tanh -> classifier.out_proj
- ELECTRA:     classifier.dense -> gelu -> classifier.out_proj
- ALBERT:      pooler tanh(W h + b) -> dropout -> classifier
- DeBERTa-v2/v3: ContextPooler (dense -> activation) -> dropout -> classifier

Layers are composed by hand from the model's own modules with a per-call attention kernel and,
optionally, the last layer for the first position only (see ``forward.py``), for every family
whose layer is a plain softmax attention block. DeBERTa's disentangled attention is run through
its own layer modules instead (one kernel; the last layer in full). Nothing of the shared model
is changed. Tests check every family's logits against ``model(...).logits``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import eager_attention_forward
from transformers.pytorch_utils import apply_chunking_to_forward

__all__ = ["Family", "FAMILIES", "MixingParts", "SUPPORTED_MODEL_TYPES", "family_of", "family_for_type"]


@dataclass(frozen=True)
class MixingParts:
    """What the context-mixing measures read from one layer's attention block

        y = norm(x + out(concat_h sum_j alpha^h_ij value(x_j)^h))

    (post-LayerNorm, the residual input x): the value projection (all heads), the dense layer the
    heads' contexts go through (its columns ``h * head_size:(h + 1) * head_size`` are head h's
    slice W_O^h), and the LayerNorm after the residual."""

    value: nn.Linear
    out: nn.Linear
    norm: nn.LayerNorm
    heads: int
    head_size: int


def _n(module: nn.Module | None) -> int:
    return 0 if module is None else sum(p.numel() for p in module.parameters())


def _heads(x: torch.Tensor, b: int, n: int, head: int) -> torch.Tensor:
    return x.view(b, n, -1, head).transpose(1, 2)  # (B, H, n, d)


def _self_attention(sa, qkv, hidden, mask, attend, cls_only: bool, dropout: float):
    """Multi-head self-attention with the family's own q/k/v projections ``qkv``: queries from
    [CLS] alone when ``cls_only``. Returns (the query rows x, the heads' context (B, Q, D))."""
    b, t, _ = hidden.shape
    head = sa.attention_head_size
    x = hidden[:, :1] if cls_only else hidden  # (B, Q, D)
    q_len = x.shape[1]
    q = _heads(qkv[0](x), b, q_len, head)  # (B, H, Q, d)
    k = _heads(qkv[1](hidden), b, t, head)  # (B, H, T, d)
    v = _heads(qkv[2](hidden), b, t, head)  # (B, H, T, d)
    out, _ = attend(sa, q, k, v, mask, dropout=dropout, scaling=sa.scaling)  # (B, Q, H, d)
    return x, out.reshape(b, q_len, -1).contiguous()


class Family:
    """Adapter for one family. Subclasses override what differs from BERT."""

    model_types: tuple[str, ...] = ()
    name = ""  # what messages call it
    base_attr = ""  # the task model's attribute holding the encoder
    class_prefix = ""  # its transformers classes' prefix: + a head's suffix (``heads.py``) names the class it loads as
    token_types = True  # does the model's forward take token_type_ids
    kernels = True  # layers take a per-call attention kernel and a [CLS]-only last layer
    head_prefixes: tuple[str, ...] = ("classifier.",)  # parameter names of the task head (training's head lr)

    # -- where things are -------------------------------------------------------------------
    def base(self, model) -> nn.Module:
        return getattr(model, self.base_attr)

    def word_embeddings(self, model) -> nn.Embedding:
        return self.base(model).embeddings.word_embeddings

    def layers(self, model) -> list[nn.Module]:
        """The modules whose outputs are ``hidden_states[1:]``, in order."""
        return list(self.base(model).encoder.layer)

    def composable(self, model) -> bool:
        """Can the [CLS] path be composed from this model's modules? (Not for decoder configs.)"""
        cfg = getattr(model, "config", None)
        return (getattr(model, self.base_attr, None) is not None and cfg is not None
                and not getattr(cfg, "is_decoder", False) and not getattr(cfg, "add_cross_attention", False))

    def max_tokens(self, config) -> int:
        """The longest input the position embeddings allow."""
        return int(config.max_position_embeddings)

    def inputs(self, **kw) -> dict:
        """Keyword arguments for the model's own forward: token_type_ids only where it takes them."""
        if not self.token_types:
            kw.pop("token_type_ids", None)
        return kw

    def scale_free_embeddings(self, model) -> bool:
        """Is depth 0 LayerNorm(word vector) alone, with no position or token-type vector added?
        LayerNorm(a v) is the same for every a > 0, so the straight path from a zero word vector
        jumps at its first point: Integrated Gradients from such a baseline spend their steps on
        that jump (``attribution_options.baseline_jumps``)."""
        return False

    # -- the path -----------------------------------------------------------------------------
    def embed(self, model, input_ids=None, token_type_ids=None, inputs_embeds=None,
              attention_mask=None) -> torch.Tensor:
        """Depth 0 (B, T, D): ``hidden_states[0]`` of the model's own forward."""
        return self.base(model).embeddings(input_ids=input_ids, token_type_ids=token_type_ids,
                                           inputs_embeds=inputs_embeds)

    def layer(self, layer, hidden: torch.Tensor, mask, attend, cls_only: bool = False) -> torch.Tensor:
        """One layer with attention function ``attend``: (B, T, D) -> (B, T, D), or (B, 1, D) for
        the first position alone with ``cls_only`` (keys and values still from every token)."""
        raise NotImplementedError

    def head(self, model, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (B, C) from the last hidden states (B, T or 1, D); reads position 0 only."""
        raise NotImplementedError

    # -- context mixing (``mixing_measures.py``) ---------------------------------------------------
    def mixing_parts(self, layer) -> MixingParts:
        """The attention block's parts of one layer (one of ``layers(model)``)."""
        sa, out = layer.attention.self, layer.attention.output
        return MixingParts(sa.value, out.dense, out.LayerNorm, sa.value.out_features // sa.attention_head_size,
                           sa.attention_head_size)

    def ffn_in(self, layer) -> nn.Linear:
        """The feed-forward block's first linear layer: what it applies to the attention block's
        LayerNorm output (``mixing_parts(layer).norm``)."""
        return layer.intermediate.dense

    def feed_forward(self, model, index: int, h: torch.Tensor, x: torch.Tensor,
                     inner: torch.Tensor | None = None) -> torch.Tensor:
        """What layer ``index`` runs after its attention block: from the block's LayerNorm output
        ``h`` (B, T, D) to the layer's output (B, T, D), ``hidden_states[index + 1]``. ``x``: the
        layer's input (B, T, D) (DeBERTa's layer-0 convolution reads it). ``inner``: the first
        linear layer's output ``ffn_in(layer)(h)`` (B, T, F) when the caller has it already (value
        zeroing builds it per head); everything else runs through the model's own modules."""
        layer = self.layers(model)[index]
        inner = layer.intermediate.dense(h) if inner is None else inner
        return layer.output(layer.intermediate.intermediate_act_fn(inner), h)  # LN(dense(act) + h)

    def post_attention(self, model, index: int, attn_out: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Layer ``index``'s output (B, T, D) from its attention output ``attn_out`` (B, T, D: after
        the output dense, before the residual) and its input ``x`` (B, T, D): the block's residual +
        LayerNorm, then ``feed_forward``."""
        norm = self.mixing_parts(self.layers(model)[index]).norm
        return self.feed_forward(model, index, norm(attn_out + x), x)

    def run_layer(self, model, index: int, hidden: torch.Tensor, attention: str = "sdpa") -> torch.Tensor:
        """Layer ``index`` in full over unpadded inputs: (B, T, D) -> (B, T, D), ``hidden_states[index + 1]``
        from ``hidden_states[index]`` (value zeroing runs copies of it). ``attention``: the kernel
        ("sdpa" or "eager"; the same output, sdpa ~1.5x faster on CPU at 128 tokens)."""
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(attention, eager_attention_forward)
        return self.layer(self.layers(model)[index], hidden, None, attend)

    def features(self, model, hidden: torch.Tensor) -> torch.Tensor:
        """What the head's last linear layer reads (B, D), from the last hidden states (B, T, D):
        ``head(h) == final_linear(dropout(features(h)))``; the probe fits that layer on these."""
        raise NotImplementedError

    def final_linear(self, model) -> nn.Linear:
        return model.classifier

    def head_rows(self, model) -> list[tuple[str, int]]:
        raise NotImplementedError

    def layer_rows(self, i: int, layer) -> list[tuple[str, int]]:
        return [(f"layer {i} attention", _n(layer.attention)),
                (f"layer {i} feed-forward", _n(layer.intermediate) + _n(layer.output))]

    def components(self, model) -> list[tuple[str, int]]:
        """(component, parameters) in model order; the rows add up to the model's total."""
        rows = [("embeddings", self.embedding_params(model))]
        for i, layer in enumerate(self.unique_layers(model), start=1):
            rows += self.layer_rows(i, layer)
        rows += self.head_rows(model)
        other = _n(model) - sum(n for _, n in rows)
        if other:
            rows.append(("other", other))
        return rows

    def embedding_params(self, model) -> int:
        return _n(self.base(model).embeddings)

    def unique_layers(self, model) -> list[nn.Module]:
        return list(self.base(model).encoder.layer)


class _BertLike(Family):
    """BERT-style layers: attention.self (query/key/value), attention.output, intermediate, output."""

    def layer(self, layer, hidden, mask, attend, cls_only=False):
        sa = layer.attention.self
        b, t, _ = hidden.shape
        head = sa.attention_head_size
        x = hidden[:, :1] if cls_only else hidden  # (B, Q, D), Q = 1 or T
        q_len = x.shape[1]
        q = _heads(sa.query(x), b, q_len, head)  # (B, H, Q, d)
        k = _heads(sa.key(hidden), b, t, head)  # (B, H, T, d)
        v = _heads(sa.value(hidden), b, t, head)  # (B, H, T, d)
        out, _ = attend(sa, q, k, v, mask, dropout=sa.dropout.p if sa.training else 0.0,
                        scaling=sa.scaling)  # (B, Q, H, d)
        out = layer.attention.output(out.reshape(b, q_len, -1).contiguous(), x)  # (B, Q, D)
        return apply_chunking_to_forward(layer.feed_forward_chunk, layer.chunk_size_feed_forward, layer.seq_len_dim,
                                         out)


class Bert(_BertLike):
    model_types = ("bert",)
    name, base_attr, class_prefix = "BERT", "bert", "Bert"

    def composable(self, model) -> bool:
        return super().composable(model) and getattr(model.bert, "pooler", None) is not None

    head_prefixes = ("bert.pooler.", "classifier.")

    def head(self, model, hidden):
        pooled = model.bert.pooler(hidden)  # (B, D): tanh(W h_CLS + b)
        return model.classifier(model.dropout(pooled))  # (B, C)

    def features(self, model, hidden):
        return model.bert.pooler(hidden)  # (B, D)

    def head_rows(self, model):
        rows = [("pooler", _n(model.bert.pooler))] if model.bert.pooler is not None else []
        return rows + [("classifier", _n(model.classifier))]


class Roberta(_BertLike):
    """RoBERTa and XLM-RoBERTa: classifier.dense -> tanh -> classifier.out_proj on <s>."""

    model_types = ("roberta",)
    name, base_attr, class_prefix = "RoBERTa", "roberta", "Roberta"

    def max_tokens(self, config) -> int:
        # positions are numbered from pad_token_id + 1 (514 embeddings -> 512 tokens)
        return int(config.max_position_embeddings) - int(config.pad_token_id or 0) - 1

    def head(self, model, hidden):
        return model.classifier(hidden)  # (B, C): the head reads hidden[:, 0]

    def features(self, model, hidden):
        c = model.classifier
        act = getattr(c, "activation", torch.tanh)  # ELECTRA: gelu; RoBERTa/XLM-R: tanh
        return act(c.dense(hidden[:, 0]))  # (B, D)

    def final_linear(self, model):
        return model.classifier.out_proj

    def head_rows(self, model):
        c = model.classifier
        return [("classifier dense", _n(c.dense)), ("classifier out_proj", _n(c.out_proj))]


class XLMRoberta(Roberta):
    model_types = ("xlm-roberta",)
    name, class_prefix = "XLM-RoBERTa", "XLMRoberta"


class Electra(Roberta):
    """ELECTRA: embeddings (-> projection to hidden size) and a RoBERTa-style head with gelu."""

    model_types = ("electra",)
    name, base_attr, class_prefix = "ELECTRA", "electra", "Electra"
    max_tokens = Family.max_tokens  # absolute positions from 0, as in BERT

    def embed(self, model, input_ids=None, token_type_ids=None, inputs_embeds=None, attention_mask=None):
        base = model.electra
        h = base.embeddings(input_ids=input_ids, token_type_ids=token_type_ids,
                            inputs_embeds=inputs_embeds)  # (B, T, E)
        proj = getattr(base, "embeddings_project", None)
        return proj(h) if proj is not None else h  # (B, T, D)

    def embedding_params(self, model):
        return _n(model.electra.embeddings) + _n(getattr(model.electra, "embeddings_project", None))


class DistilBert(Family):
    model_types = ("distilbert",)
    name, base_attr, class_prefix = "DistilBERT", "distilbert", "DistilBert"
    token_types = False

    def layers(self, model):
        return list(model.distilbert.transformer.layer)

    def unique_layers(self, model):
        return self.layers(model)

    def embed(self, model, input_ids=None, token_type_ids=None, inputs_embeds=None, attention_mask=None):
        return model.distilbert.embeddings(input_ids, inputs_embeds)  # (B, T, D)

    def layer(self, layer, hidden, mask, attend, cls_only=False):
        sa = layer.attention
        x, ctx = _self_attention(sa, (sa.q_lin, sa.k_lin, sa.v_lin), hidden, mask, attend, cls_only,
                                 sa.dropout.p if sa.training else 0.0)
        out = layer.sa_layer_norm(sa.out_lin(ctx) + x)  # (B, Q, D)
        return layer.output_layer_norm(layer.ffn(out) + out)  # (B, Q, D)

    def mixing_parts(self, layer):
        sa = layer.attention
        return MixingParts(sa.v_lin, sa.out_lin, layer.sa_layer_norm, sa.n_heads, sa.attention_head_size)

    def ffn_in(self, layer):
        return layer.ffn.lin1

    def feed_forward(self, model, index, h, x, inner=None):
        layer = self.layers(model)[index]
        ffn = layer.ffn
        inner = ffn.lin1(h) if inner is None else inner
        return layer.output_layer_norm(ffn.dropout(ffn.lin2(ffn.activation(inner))) + h)  # (B, T, D)

    head_prefixes = ("pre_classifier.", "classifier.")

    def head(self, model, hidden):
        x = torch.relu(model.pre_classifier(hidden[:, 0]))  # (B, D)
        return model.classifier(model.dropout(x))  # (B, C)

    def features(self, model, hidden):
        return torch.relu(model.pre_classifier(hidden[:, 0]))  # (B, D)

    def layer_rows(self, i, layer):
        return [(f"layer {i} attention", _n(layer.attention) + _n(layer.sa_layer_norm)),
                (f"layer {i} feed-forward", _n(layer.ffn) + _n(layer.output_layer_norm))]

    def head_rows(self, model):
        return [("pre_classifier", _n(model.pre_classifier)), ("classifier", _n(model.classifier))]


class Albert(Family):
    """ALBERT: factorised embeddings (E -> D mapping at the encoder's entry) and layers that share
    parameters: ``layers`` lists every call in order (repeating the shared modules), the summary
    counts each shared module once."""

    model_types = ("albert",)
    name, base_attr, class_prefix = "ALBERT", "albert", "Albert"

    def composable(self, model):
        return super().composable(model) and model.albert.pooler is not None

    def layers(self, model):
        enc, cfg = model.albert.encoder, model.config
        out = []
        for i in range(cfg.num_hidden_layers):
            group = enc.albert_layer_groups[int(i / (cfg.num_hidden_layers / cfg.num_hidden_groups))]
            out += list(group.albert_layers)
        return out

    def unique_layers(self, model):
        return [m for g in model.albert.encoder.albert_layer_groups for m in g.albert_layers]

    def embed(self, model, input_ids=None, token_type_ids=None, inputs_embeds=None, attention_mask=None):
        h = model.albert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids,
                                    inputs_embeds=inputs_embeds)  # (B, T, E)
        return model.albert.encoder.embedding_hidden_mapping_in(h)  # (B, T, D)

    def embedding_params(self, model):
        return _n(model.albert.embeddings) + _n(model.albert.encoder.embedding_hidden_mapping_in)

    def layer(self, layer, hidden, mask, attend, cls_only=False):
        sa = layer.attention
        x, ctx = _self_attention(sa, (sa.query, sa.key, sa.value), hidden, mask, attend, cls_only,
                                 sa.attention_dropout.p if sa.training else 0.0)
        out = sa.output_dropout(sa.dense(ctx))  # (B, Q, D)
        out = sa.LayerNorm(x + out)  # (B, Q, D)
        ffn = apply_chunking_to_forward(layer.ff_chunk, layer.chunk_size_feed_forward, layer.seq_len_dim, out)
        return layer.full_layer_layer_norm(ffn + out)  # (B, Q, D)

    def mixing_parts(self, layer):
        sa = layer.attention
        return MixingParts(sa.value, sa.dense, sa.LayerNorm, sa.num_attention_heads, sa.attention_head_size)

    def ffn_in(self, layer):
        return layer.ffn

    def feed_forward(self, model, index, h, x, inner=None):
        layer = self.layers(model)[index]
        inner = layer.ffn(h) if inner is None else inner
        return layer.full_layer_layer_norm(layer.ffn_output(layer.activation(inner)) + h)  # (B, T, D)

    head_prefixes = ("albert.pooler.", "classifier.")

    def head(self, model, hidden):
        return model.classifier(model.dropout(self.features(model, hidden)))  # (B, C)

    def features(self, model, hidden):
        return model.albert.pooler_activation(model.albert.pooler(hidden[:, 0]))  # (B, D): tanh(W h + b)

    def components(self, model):
        uses = len(self.layers(model)) // max(1, len(self.unique_layers(model)))  # calls of each shared layer
        return [(f"{n} (used {uses}x)" if n.startswith("shared") and uses > 1 else n, k)
                for n, k in super().components(model)]

    def layer_rows(self, i, layer):
        n = f"shared layer {i}"
        return [(f"{n} attention", _n(layer.attention)),
                (f"{n} feed-forward", _n(layer.ffn) + _n(layer.ffn_output) + _n(layer.full_layer_layer_norm))]

    def head_rows(self, model):
        return [("pooler", _n(model.albert.pooler)), ("classifier", _n(model.classifier))]


class DebertaV2(Family):
    """DeBERTa-v2/v3: disentangled (relative-position) attention, run through its own layers."""

    model_types = ("deberta-v2",)
    name, base_attr, class_prefix = "DeBERTa-v2", "deberta", "DebertaV2"
    kernels = False

    def composable(self, model):
        return getattr(model, "deberta", None) is not None and getattr(model.deberta, "z_steps", 0) <= 1

    def scale_free_embeddings(self, model):
        # DeBERTa-v3's configuration: relative positions only, and no token types
        cfg = model.config
        return not getattr(cfg, "position_biased_input", True) and not getattr(cfg, "type_vocab_size", 0)

    def embed(self, model, input_ids=None, token_type_ids=None, inputs_embeds=None, attention_mask=None):
        ref = input_ids if input_ids is not None else inputs_embeds
        if attention_mask is None:
            attention_mask = torch.ones(ref.shape[:2], dtype=torch.long, device=ref.device)  # (B, T)
        if token_type_ids is None:
            token_type_ids = torch.zeros(ref.shape[:2], dtype=torch.long, device=ref.device)  # (B, T)
        return model.deberta.embeddings(input_ids=input_ids, token_type_ids=token_type_ids, mask=attention_mask,
                                        inputs_embeds=inputs_embeds)  # (B, T, D)

    def run(self, model, hidden: torch.Tensor, depth: int, attention_mask, stop: int | None = None) -> torch.Tensor:
        """The encoder's loop (``DebertaV2Encoder.forward``) from ``depth`` on, up to layer ``stop`` (None: the top):
        (B, T, D) -> (B, T, D)."""
        enc = model.deberta.encoder
        if attention_mask is None:
            attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)  # (B, T)
        mask = enc.get_attention_mask(attention_mask)  # (B, 1, T, T)
        rel_pos = enc.get_rel_pos(hidden)
        rel_emb = enc.get_rel_embedding()
        for i, layer in enumerate(enc.layer[depth:stop], start=depth):
            out, _ = layer(hidden, mask, relative_pos=rel_pos, rel_embeddings=rel_emb)  # (B, T, D)
            if i == 0 and enc.conv is not None:
                out = enc.conv(hidden, out, attention_mask)  # the embeddings' output is layer 0's input
            hidden = out
        return hidden

    def mixing_parts(self, layer):
        sa, out = layer.attention.self, layer.attention.output
        return MixingParts(sa.value_proj, out.dense, out.LayerNorm, sa.num_attention_heads, sa.attention_head_size)

    def feed_forward(self, model, index, h, x, inner=None):
        """Intermediate and output as in BERT, and after layer 0 the convolution the encoder applies
        there (it reads the layer's input ``x``)."""
        out = super().feed_forward(model, index, h, x, inner)  # (B, T, D)
        enc = model.deberta.encoder
        if index == 0 and enc.conv is not None:
            out = enc.conv(x, out, torch.ones(x.shape[:2], dtype=torch.long, device=x.device))
        return out

    def run_layer(self, model, index, hidden, attention="sdpa"):
        """Its own layer module (disentangled attention), and after layer 0 the convolution the
        encoder applies there, so the output is ``hidden_states[index + 1]``."""
        enc = model.deberta.encoder
        attention_mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)  # (B, T)
        mask = enc.get_attention_mask(attention_mask)  # (B, 1, T, T)
        out, _ = enc.layer[index](hidden, mask, relative_pos=enc.get_rel_pos(hidden),
                                  rel_embeddings=enc.get_rel_embedding())  # (B, T, D)
        if index == 0 and enc.conv is not None:
            out = enc.conv(hidden, out, attention_mask)
        return out

    head_prefixes = ("pooler.", "classifier.")

    def head(self, model, hidden):
        return model.classifier(model.dropout(model.pooler(hidden)))  # (B, C): the pooler reads hidden[:, 0]

    def features(self, model, hidden):
        return model.pooler(hidden)  # (B, D)

    def embedding_params(self, model):
        return _n(model.deberta.embeddings)

    def head_rows(self, model):
        enc = model.deberta.encoder
        rows = []
        rel = _n(getattr(enc, "rel_embeddings", None)) + _n(getattr(enc, "LayerNorm", None))
        if rel:
            rows.append(("relative position embeddings", rel))
        if enc.conv is not None:
            rows.append(("layer 1 convolution", _n(enc.conv)))
        return rows + [("pooler", _n(model.pooler)), ("classifier", _n(model.classifier))]


FAMILIES: tuple[Family, ...] = (Bert(), DistilBert(), Roberta(), XLMRoberta(), Albert(), Electra(), DebertaV2())
_BY_TYPE = {t: f for f in FAMILIES for t in f.model_types}
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_BY_TYPE)


def family_for_type(model_type: str | None) -> Family | None:
    return _BY_TYPE.get(model_type)


def family_of(model) -> Family | None:
    """The adapter for a loaded model (None: a model type this tool does not know)."""
    cfg = getattr(model, "config", None)
    return _BY_TYPE.get(getattr(cfg, "model_type", None))
