"""The context-mixing measures (raw, norm, value_zeroing, alti) on a tiny random classifier of every
family: the decompositions add back to the model's own attention block (captured with forward hooks
on its modules), rows sum to 1, a token whose value vectors are zeroed gets nothing from the measures
that read value vectors, value zeroing runs batched, and bad input is refused with a message."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from test_families import FAMILIES, build_family_model

import bertviz_app as bv
from bertviz_app import InputError
from bertviz_app.interpret import mixing_measures as cm
from bertviz_app.models.encoding import encode
from bertviz_app.models.families import family_of

TEXT = "the film was not good, it was awful"
TOL = 1e-5


@pytest.fixture(scope="module", params=FAMILIES)
def fam_lm(request, tmp_path_factory):
    path = build_family_model(request.param, tmp_path_factory.mktemp("cm") / request.param)
    return bv.load_model(str(path), device="cpu")


def _inputs(lm, text=TEXT):
    inputs, info = encode(lm, text)
    return inputs, info


def _unique(modules):
    seen, out = set(), []
    for m in modules:
        if id(m) not in seen:
            seen.add(id(m))
            out.append(m)
    return out


def _capture(lm, inputs, pick):
    """The outputs of one module per layer (``pick(parts)``) in the model's own forward, in layer order."""
    model = lm.fp32_model()
    fam = family_of(model)
    seen = []
    handles = [m.register_forward_hook(lambda mod, args, out: seen.append(out[0].detach().clone()))
               for m in _unique(pick(fam.mixing_parts(layer)) for layer in fam.layers(model))]
    try:
        with torch.inference_mode():
            model(**fam.inputs(**inputs))
    finally:
        for h in handles:
            h.remove()
    assert len(seen) == len(fam.layers(model))
    return [s.numpy() for s in seen]


def test_alti_pieces_add_back_to_the_attention_block_output(fam_lm):
    inputs, info = _inputs(fam_lm)
    block = _capture(fam_lm, inputs, lambda p: p.norm)  # LN(x + attention): the block's output
    for layer, want in enumerate(block):
        d = cm.decompose_layer(fam_lm, inputs, layer)
        assert d.pieces.shape == (len(info), len(info), want.shape[-1])
        np.testing.assert_allclose(d.pieces.sum(axis=1) + d.bias, want, atol=TOL)


def test_norm_vectors_add_back_to_the_attention_output_before_the_residual(fam_lm):
    inputs, _ = _inputs(fam_lm)
    dense = _capture(fam_lm, inputs, lambda p: p.out)  # sum_h W_O^h (attention-weighted values) + b_O
    for layer, want in enumerate(dense):
        d = cm.decompose_layer(fam_lm, inputs, layer)
        np.testing.assert_allclose(d.mixed.sum(axis=1) + d.out_bias, want, atol=TOL)


@pytest.mark.parametrize("measure", cm.MEASURES)
def test_shapes_and_rows_sum_to_one(fam_lm, measure):
    maps = cm.context_mixing(fam_lm, TEXT, measure=measure)
    t = len(maps.tokens)
    n_layers = fam_lm.model.config.num_hidden_layers
    assert maps.measure == measure
    assert maps.weights.shape[0] == n_layers and maps.weights.shape[-2:] == (t, t)
    assert maps.weights.shape[1] == (1 if measure in ("value_zeroing", "alti") else
                                     fam_lm.model.config.num_attention_heads)
    assert maps.combined.shape == maps.aggregated.shape == (n_layers, t, t)
    for arr in (maps.combined, maps.aggregated) + ((maps.weights,) if maps.num_heads == 1 else ()):
        np.testing.assert_allclose(arr.sum(axis=-1), 1.0, atol=TOL)
        assert (arr >= 0).all()
    np.testing.assert_allclose(maps.cls_scores, maps.aggregated[-1, 0])
    d = maps.to_dict()
    assert set(d) == {"tokens", "measure", "weights", "combined", "aggregated", "cls_scores", "seconds"}
    assert np.asarray(d["weights"]).shape[-2:] == (t, t)


def test_raw_is_the_attention_and_its_rollout(fam_lm):
    maps = cm.context_mixing(fam_lm, TEXT, measure="raw")
    att = bv.attention(fam_lm, TEXT)
    np.testing.assert_allclose(maps.weights, att.weights, atol=1e-6)
    np.testing.assert_allclose(maps.combined, bv.mean_heads(att), atol=1e-6)
    np.testing.assert_allclose(maps.aggregated, bv.rollout(att), atol=1e-6)
    assert maps.tokens == att.tokens


def test_norm_per_head_is_attention_times_vector_norm(fam_lm):
    """Per head ||alpha f(x_j)|| = alpha ||f(x_j)||: where a head does not look, it takes nothing."""
    maps = cm.context_mixing(fam_lm, TEXT, measure="norm")
    att = bv.attention(fam_lm, TEXT).weights
    ratio = maps.weights / np.where(att > 0, att, 1)  # (L, H, T, T): ||f^h(x_j)||, the same in every row i
    np.testing.assert_allclose(ratio, np.broadcast_to(ratio[:, :, :1], ratio.shape), rtol=1e-4, atol=1e-6)


def test_a_token_with_zeroed_values_contributes_nothing(fam_lm):
    inputs, info = _inputs(fam_lm)
    j = 2  # a word, not a special token
    model = fam_lm.fp32_model()
    fam = family_of(model)

    def zero(module, args, out):
        out = out.clone()
        out[:, j] = 0.0
        return out

    handles = [m.register_forward_hook(zero)
               for m in _unique(fam.mixing_parts(layer).value for layer in fam.layers(model))]
    try:
        res = {m: cm.context_mixing_inputs(fam_lm, inputs, m, info) for m in ("norm", "value_zeroing", "alti")}
    finally:
        for h in handles:
            h.remove()
    others = np.arange(len(info)) != j
    np.testing.assert_allclose(res["norm"].weights[..., j], 0.0, atol=TOL)
    np.testing.assert_allclose(res["norm"].combined[..., j], 0.0, atol=TOL)
    for m in ("value_zeroing", "alti"):
        np.testing.assert_allclose(res[m].combined[:, others, j], 0.0, atol=TOL)
    # and without the hook it does contribute
    plain = cm.context_mixing_inputs(fam_lm, inputs, "alti", info)
    assert plain.combined[:, others, j].max() > 1e-4 or plain.combined.shape[-1] <= j


def _value_zeroing_by_hooks(model, hidden):
    """The reference: each layer run again on its input once per token j, a hook on the value module
    zeroing token j's value vector (every head), and the cosine distance of every token's output from
    the unchanged layer's output: (L, T, T)."""
    fam = family_of(model)
    out = []
    for i, layer in enumerate(fam.layers(model)):
        x = hidden[i][None]  # (1, T, D)
        base = fam.run_layer(model, i, x, attention="eager")[0]  # (T, D)
        dist = np.empty((x.shape[1], x.shape[1]))
        for j in range(x.shape[1]):
            def zero(module, args, output, j=j):
                output = output.clone()
                output[:, j] = 0.0
                return output

            handle = fam.mixing_parts(layer).value.register_forward_hook(zero)
            try:
                y = fam.run_layer(model, i, x, attention="eager")[0]  # (T, D)
            finally:
                handle.remove()
            cos = (y * base).sum(-1) / (y.norm(dim=-1) * base.norm(dim=-1))
            dist[:, j] = (1.0 - cos).numpy()  # every token's change with token j's value zeroed
        out.append(dist)
    return np.stack(out)


def test_value_zeroing_equals_rerunning_the_layer_with_the_value_zeroed(fam_lm):
    """The measure removes sum_h alpha^h_ij f^h(x_j) from the attention output and runs only the layer's
    tail (with the feed-forward's first layer built per head); it must equal zeroing the value vector
    and running the whole layer again. In float64, where 1 - cos of the hook loop is exact enough."""
    inputs, info = _inputs(fam_lm)
    model = copy.deepcopy(fam_lm.fp32_model()).double()
    fam = family_of(model)
    with torch.inference_mode():
        out = model(**fam.inputs(**inputs), output_hidden_states=True, output_attentions=True)
        hidden = torch.stack([h[0] for h in out.hidden_states])  # (L + 1, T, D)
        attn = torch.stack([a[0] for a in out.attentions])  # (L, H, T, T)
        want = _value_zeroing_by_hooks(model, hidden)
        got = cm.value_zeroing_distances(model, hidden, attn)
    assert got.shape == want.shape == (len(fam.layers(model)), len(info), len(info))
    assert want.max() > 0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-15)
    rows = want / want.sum(axis=-1, keepdims=True)  # what the page shows
    np.testing.assert_allclose(got / got.sum(axis=-1, keepdims=True), rows, atol=TOL)
    # the float32 measure (a random tiny model's distances are ~1e-7: float32 rounding shows at ~1e-4 relative)
    maps = cm.context_mixing_inputs(fam_lm, inputs, "value_zeroing", info)
    np.testing.assert_allclose(maps.combined, rows, atol=1e-3)


def test_post_attention_is_the_rest_of_the_layer(fam_lm):
    """What value zeroing runs per copy: from the attention output (after the output dense, captured in
    the model's own forward) and the layer's input, the layer's output hidden_states[l + 1]."""
    inputs, _ = _inputs(fam_lm)
    model = fam_lm.fp32_model()
    fam = family_of(model)
    dense = _capture(fam_lm, inputs, lambda p: p.out)
    with torch.inference_mode():
        hs = model(**fam.inputs(**inputs), output_hidden_states=True).hidden_states
        for i, attn_out in enumerate(dense):
            got = fam.post_attention(model, i, torch.from_numpy(attn_out)[None], hs[i])
            np.testing.assert_allclose(got, hs[i + 1], atol=TOL)
            layer = fam.layers(model)[i]
            h = fam.mixing_parts(layer).norm(torch.from_numpy(attn_out)[None] + hs[i])
            inner = fam.ffn_in(layer)(h)
            np.testing.assert_allclose(fam.feed_forward(model, i, h, hs[i], inner=inner), hs[i + 1], atol=TOL)


def test_value_zeroing_is_batched(fam_lm, monkeypatch):
    """One batched call of the layer's tail per chunk of zeroed tokens (plus the unchanged input), not
    one forward per token; with a smaller budget it takes more, smaller chunks, same result."""
    inputs, info = _inputs(fam_lm)
    fam = family_of(fam_lm.model)
    t, n_layers = len(info), fam_lm.model.config.num_hidden_layers
    calls = []
    real = fam.feed_forward

    def counting(model, index, h, x, **kw):
        calls.append((index, h.shape[0]))
        return real(model, index, h, x, **kw)

    monkeypatch.setattr(fam, "feed_forward", counting)
    forwards = []
    handle = fam_lm.fp32_model().register_forward_hook(lambda *a: forwards.append(1))
    try:
        whole = cm.context_mixing_inputs(fam_lm, inputs, "value_zeroing", info)
        assert len(forwards) == 1  # the model itself runs once (hidden states); the rest is per layer
        assert calls == [(i, b) for i in range(n_layers) for b in (1, t)]
        calls.clear()
        monkeypatch.setattr(cm, "VZ_CHUNK_FLOATS", 1)  # one copy per call
        assert cm.value_zeroing_chunk(t, 16, 2, 32) == 1
        single = cm.context_mixing_inputs(fam_lm, inputs, "value_zeroing", info)
    finally:
        handle.remove()
    assert len(calls) == n_layers * (1 + t)
    # the same up to float32 rounding of different batch shapes (a random tiny model's value vectors move
    # a layer's output by ~1e-4, so its distances are ~1e-7 and carry a relative rounding of ~1e-4)
    np.testing.assert_allclose(single.combined, whole.combined, atol=1e-3)


def test_chunk_size_bounds_memory():
    assert cm.value_zeroing_chunk(512, 768, 12, 3072) >= 1
    per_copy = 512 * (6 * 768 + 3 * 3072 + 12)
    assert cm.value_zeroing_chunk(512, 768, 12, 3072) * per_copy <= cm.VZ_CHUNK_FLOATS
    assert cm.value_zeroing_chunk(4, 16, 2, 32) == 4
    assert math.isclose(cm.value_zeroing_chunk(10**6, 10**4, 1, 1), 1)


def test_encoded_inputs_give_the_same_maps_and_the_text_call_is_memoised(fam_lm):
    inputs, info = _inputs(fam_lm)
    lm = fam_lm.with_settings(memo_size=8)
    for measure in cm.MEASURES:
        a = cm.context_mixing(lm, TEXT, measure=measure)
        assert cm.context_mixing(lm, TEXT, measure=measure) is a
        assert cm.context_mixing(lm, TEXT + " ", measure=measure) is not a
        b = cm.context_mixing_inputs(lm, {"input_ids": inputs["input_ids"][0]}, measure)  # (T,), no info
        np.testing.assert_allclose(b.aggregated, a.aggregated, atol=1e-6)
        assert b.tokens == a.tokens


def test_unknown_and_unsupported_measures_are_refused(fam_lm, monkeypatch):
    assert cm.supported_measures(fam_lm) == cm.MEASURES
    assert cm.check_measure(fam_lm, "Value-Zeroing") == "value_zeroing"
    with pytest.raises(InputError) as e:
        cm.context_mixing(fam_lm, TEXT, measure="attention-flow")
    assert all(m in str(e.value) for m in cm.MEASURES)
    monkeypatch.setattr(cm, "family_of", lambda model: None)  # a model type the tool cannot decompose
    assert cm.supported_measures(fam_lm) == ("raw",)
    with pytest.raises(InputError, match="measures that work here: raw"):
        cm.check_measure(fam_lm, "alti")


def test_bad_texts_are_refused(fam_lm):
    tok = fam_lm.tokenizer
    only_specials = f"{tok.cls_token or tok.bos_token} {tok.sep_token or tok.eos_token}"
    cases = [("", "empty"), ("   \n", "empty"), ("x" * (fam_lm.settings.max_chars + 1), "limit"),
             (only_specials, "special")]
    invisible = "\x01\x02\u200b"
    if tok.unk_token_id not in tok(invisible, add_special_tokens=False)["input_ids"]:  # else it is [UNK]: text
        cases.append((invisible, "special"))
    for text, match in cases:
        with pytest.raises(InputError, match=match):
            cm.context_mixing(fam_lm, text, measure="alti")
    first, last = tok.cls_token_id or tok.bos_token_id, tok.sep_token_id or tok.eos_token_id
    with pytest.raises(InputError, match="special"):
        cm.context_mixing_inputs(fam_lm, {"input_ids": torch.tensor([[first, last]])}, "raw")
    if tok.unk_token_id is not None:  # [UNK] is the reader's text (an emoji), as the page's Analyze counts it
        m = cm.context_mixing_inputs(fam_lm, {"input_ids": torch.tensor([[first, tok.unk_token_id, last]])}, "alti")
        np.testing.assert_allclose(m.aggregated.sum(-1), 1, atol=TOL)



@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_run_layer_is_the_models_layer(fam_lm, attention):
    """What value zeroing runs copies of: layer l from hidden_states[l] gives hidden_states[l + 1]."""
    inputs, _ = _inputs(fam_lm)
    model = fam_lm.fp32_model()
    fam = family_of(model)
    with torch.inference_mode():
        hs = model(**fam.inputs(**inputs), output_hidden_states=True).hidden_states
        for i in range(len(fam.layers(model))):
            np.testing.assert_allclose(fam.run_layer(model, i, hs[i], attention=attention), hs[i + 1], atol=TOL)
