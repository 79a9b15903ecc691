"""Extractive question answering end to end (issue 33): a ``*ForQuestionAnswering`` of each of the 7 families opens
through the registry with the span head, ``bv.answer`` finds answer spans in a context (n-best, a longest answer,
character offsets into the context as given, SQuAD 2.0's no-answer against a threshold, long contexts in windows),
and the CLI's ``answer``, ``POST /v1/answer`` and gradio's ``/answer`` answer the same JSON.

The independent reference: transformers 5 removed the question-answering pipeline, so ``pipeline_reference`` below
is transformers 4.57's ``QuestionAnsweringPipeline`` (``preprocess``, ``select_starts_ends``, ``decode_spans``,
``postprocess``) written out step by step on numpy, one example at a time, one window per forward of the model's
own ``forward``. Written out once, it was checked against that release's pipeline class itself, run on the same
tiny models: the same answers and offsets on all 7 families, scores within 1e-6.

The tiny models are each family's tiny model (``conftest.build_family_model``: its tokenizer and config) with a
span head: seeded random ``qa_outputs`` (spans differ by family and context), or one steered to a word (its
start and end logits point along the direction its last hidden states take, so the answer is that word wherever it
stands) or to the first position (the model says "no answer")."""

from __future__ import annotations

import json
import random

import httpx
import numpy as np
import pytest
import torch
import transformers as tf

import bertviz_app as bv
from bertviz_app import service
from bertviz_app.cli import main
from bertviz_app.errors import InputError, ModelNotFoundError
from bertviz_app.models import forward
from bertviz_app.models.catalog import folder_head
from bertviz_app.models.heads import QUESTION_ANSWERING, head_of

from conftest import FAMILIES, build_family_model, make_tiny_model

WORDS = ["the", "film", "movie", "was", "good", "bad", "great", "awful", "is", "it", "fun", "slog", "gorgeous"]
QUESTION = "what was the film"
CONTEXT = "the film was awful the movie joyless gorgeous moving film it was fun a tedious slog is not joy"


def long_context(n: int = 150, seed: int = 1) -> str:
    return " ".join(random.Random(seed).choices(WORDS, k=n))


def _save(model, path):
    (path / "model.safetensors").unlink()
    model.save_pretrained(path, safe_serialization=True)
    return path


def build_qa(family: str, path, seed: int = 0, scale: float = 1.0):
    """``family``'s tiny model with a span head saved in ``path``: ``qa_outputs`` seeded normal x ``scale`` (the
    last hidden states are LayerNormed, so start and end logits spread over a few units), its bias normal x 0.5."""
    build_family_model(family, path)
    torch.manual_seed(seed)
    model = tf.AutoModelForQuestionAnswering.from_config(tf.AutoConfig.from_pretrained(path))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.qa_outputs.weight.copy_(scale * torch.randn(model.qa_outputs.weight.shape, generator=gen))
        model.qa_outputs.bias.copy_(0.5 * torch.randn(2, generator=gen))
    return _save(model, path)


def build_steered(family: str, path, word: str | None, steps: int = 300):
    """``family``'s tiny span model steered to ``word`` (None: to the first position, "no answer"): the word's
    (or [CLS]'s) embedding row set to a long random vector, then ``qa_outputs`` alone fitted (the last hidden
    states fixed; Adam, ``steps`` steps) to start and end there in 48 contexts of random words with ``word`` at a
    random place, so the model answers that word wherever it stands."""
    build_qa(family, path)
    tok = tf.AutoTokenizer.from_pretrained(path)
    model = tf.AutoModelForQuestionAnswering.from_pretrained(path).eval()
    ids = tok(" " + word, add_special_tokens=False)["input_ids"][-1:] if word else [tok.cls_token_id]
    table = model.get_input_embeddings().weight  # (V, E): the word's row made long and one of a kind
    with torch.no_grad():
        table[ids] = 4 * table.norm(dim=1).mean() * torch.nn.functional.normalize(
            torch.randn(table.shape[1], generator=torch.Generator().manual_seed(5)), dim=0)
    rng = random.Random(4)
    contexts = []
    for _ in range(48):
        words = rng.choices(WORDS, k=rng.randint(5, 40))
        words.insert(rng.randint(0, len(words)), word or "joy")
        contexts.append(" ".join(words))
    enc = tok([QUESTION] * len(contexts), contexts, truncation="only_second", max_length=64, padding=True,
              return_tensors="pt", return_offsets_mapping=True)
    offsets = enc.pop("offset_mapping")
    with torch.no_grad():
        hidden = model(**enc, output_hidden_states=True).hidden_states[-1]  # (B, T, D)
    in_context = torch.tensor([[s == 1 for s in e.sequence_ids] for e in enc.encodings])  # (B, T)
    allowed = in_context.clone()
    allowed[:, 0] = True
    target = torch.zeros(len(contexts), dtype=torch.long)  # "no answer": the first position
    if word is not None:
        for r, c in enumerate(contexts):
            at = c.index(word)
            target[r] = next(i for i in range(offsets.shape[1]) if in_context[r, i] and offsets[r, i, 1] > at)
    head = model.qa_outputs
    opt = torch.optim.Adam(head.parameters(), lr=0.1)
    for _ in range(steps):
        logits = head(hidden).masked_fill(~allowed[..., None], -1e4)  # (B, T, 2)
        loss = torch.nn.functional.cross_entropy(logits[..., 0], target) + torch.nn.functional.cross_entropy(
            logits[..., 1], target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return _save(model, path)


@pytest.fixture(scope="module")
def qa_dir(tmp_path_factory):
    """family, kind ("random", "joy" or "none") -> the folder of that tiny span model, built once per module."""
    root = tmp_path_factory.mktemp("qa")
    built = {}

    def get(family: str, kind: str = "random"):
        if (family, kind) not in built:
            path = root / f"{family}-{kind}"
            if kind == "random":
                build_qa(family, path)
            else:
                build_steered(family, path, None if kind == "none" else kind)
            built[family, kind] = path
        return built[family, kind]

    return get


def open_qa(qa_dir, family="bert", kind="random"):
    return bv.load_model(str(qa_dir(family, kind)), device="cpu")


# --------------------------------------------------------------------------- the reference
def pipeline_reference(model, tokenizer, question, context, top_k=1, max_answer_len=15,
                       handle_impossible_answer=False, max_seq_len=None, doc_stride=None):
    """transformers 4.57's ``pipeline("question-answering")(question=..., context=..., top_k=..., ...)`` (fast
    tokenizer, question first, ``align_to_words=True``) on ``model``: a list of {"score", "start", "end",
    "answer"}, best first."""
    max_seq_len = min(tokenizer.model_max_length, 384) if max_seq_len is None else max_seq_len
    doc_stride = min(max_seq_len // 2, 128) if doc_stride is None else doc_stride
    enc = tokenizer(text=question, text_pair=context, padding="do_not_pad", truncation="only_second",
                    max_length=max_seq_len, stride=doc_stride, return_token_type_ids=True,
                    return_overflowing_tokens=True, return_offsets_mapping=True, return_special_tokens_mask=True)
    min_null_score = 1000000
    answers = []
    for i in range(len(enc["input_ids"])):
        p_mask = [tok != 1 for tok in enc.sequence_ids(i)]
        ids = np.array(enc["input_ids"][i])
        for c in np.nonzero(ids == tokenizer.cls_token_id)[0]:
            p_mask[c] = 0
        inputs = {k: torch.tensor([enc[k][i]]) for k in tokenizer.model_input_names}
        with torch.no_grad():
            out = model(**inputs)
        start, end = out.start_logits.numpy(), out.end_logits.numpy()  # (1, T)
        attention_mask = inputs["attention_mask"].numpy()
        # select_starts_ends
        undesired = np.abs(np.array(p_mask) - 1) & attention_mask
        masked = undesired == 0.0
        start = np.where(masked, -10000.0, start)
        end = np.where(masked, -10000.0, end)
        start = np.exp(start - start.max(axis=-1, keepdims=True))
        start = start / start.sum()
        end = np.exp(end - end.max(axis=-1, keepdims=True))
        end = end / end.sum()
        if handle_impossible_answer:
            min_null_score = min(min_null_score, (start[0, 0] * end[0, 0]).item())
        start[0, 0] = end[0, 0] = 0.0
        # decode_spans, with the postprocess's top_k * 2 + 10 candidates (align_to_words)
        k = top_k * 2 + 10
        candidates = np.tril(np.triu(np.matmul(start[..., None], end[:, None, :])), max_answer_len - 1)
        flat = candidates.flatten()
        if k == 1:
            order = [np.argmax(flat)]
        elif len(flat) < k:
            order = np.argsort(-flat)
        else:
            part = np.argpartition(-flat, k)[0:k]
            order = part[np.argsort(-flat[part])]
        starts, ends = np.unravel_index(order, candidates.shape)[1:]
        keep = np.isin(starts, undesired.nonzero()) & np.isin(ends, undesired.nonzero())
        starts, ends = starts[keep], ends[keep]
        scores = candidates[0, starts, ends]
        # postprocess: to the context's characters by whole words, spans of one text summed
        e = enc[i]
        for s, t, score in zip(starts, ends, scores):
            try:
                a = e.word_to_chars(e.token_to_word(s), sequence_index=1)[0]
                b = e.word_to_chars(e.token_to_word(t), sequence_index=1)[1]
            except Exception:
                a, b = e.offsets[s][0], e.offsets[t][1]
            same = next((x for x in answers if x["answer"].lower() == context[a:b].lower()), None)
            if same:
                same["score"] += score.item()
            else:
                answers.append({"score": score.item(), "start": a, "end": b, "answer": context[a:b]})
    if handle_impossible_answer:
        answers.append({"score": min_null_score, "start": 0, "end": 0, "answer": ""})
    return sorted(answers, key=lambda x: x["score"], reverse=True)[:top_k]


def as_pipeline(a: bv.Answer, top_k: int, null: bool) -> list[dict]:
    """``a``'s n-best as the pipeline lists them: with handle_impossible_answer the no-answer entry among them."""
    rows = [{"score": s.score, "start": s.start, "end": s.end, "answer": s.text} for s in a.n_best]
    if null:
        rows.append({"score": a.no_answer_score, "start": 0, "end": 0, "answer": ""})
    return sorted(rows, key=lambda x: x["score"], reverse=True)[:top_k]


def assert_same(got: list[dict], want: list[dict]):
    assert [(g["answer"], g["start"], g["end"]) for g in got] == [(w["answer"], w["start"], w["end"]) for w in want]
    np.testing.assert_allclose([g["score"] for g in got], [w["score"] for w in want], rtol=1e-4, atol=0)


# --------------------------------------------------------------------------- the head
@pytest.mark.parametrize("family", FAMILIES)
def test_a_qa_checkpoint_opens_with_the_span_head(qa_dir, family):
    lm = open_qa(qa_dir, family)
    assert lm.head is QUESTION_ANSWERING is head_of(lm.model) and lm.head.reads == "span"
    assert type(lm.model).__name__.endswith("ForQuestionAnswering")
    assert folder_head(qa_dir(family)) is QUESTION_ANSWERING  # read from config.json, as the model lists read it
    enc = lm.tokenizer([QUESTION, "is it"], [CONTEXT, "the film"], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = lm.model(**enc)
        mine = forward.classifier_logits(lm.model, **enc, cls_only=False)  # (B, T, 2): the composed forward
    torch.testing.assert_close(mine[..., 0], out.start_logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(mine[..., 1], out.end_logits, rtol=0, atol=1e-5)
    assert float(out.start_logits.std()) > 0.3  # the seeded head gives spans to choose from
    s = bv.summary(lm)
    assert s.head == "question answering" == s.to_dict()["head"]
    rows = dict(s.components)
    assert rows["span head (qa_outputs)"] == sum(p.numel() for p in lm.model.qa_outputs.parameters())
    assert sum(rows.values()) == s.total_params


# --------------------------------------------------------------------------- the pipeline's answers
@pytest.mark.parametrize("family", FAMILIES)
def test_answers_equal_the_pipelines(qa_dir, family):
    """n-best, the longest answer, no-answer on and off, one window and several: the pipeline's answers, offsets
    and scores (rtol 1e-4) on every family."""
    lm = open_qa(qa_dir, family)
    long = long_context()
    cases = ((QUESTION, CONTEXT, 5, 8, 16), (QUESTION, CONTEXT, 1, 30, 16), ("what was it", long, 3, 5, 10),
             ("is the movie good or bad", long, 7, 12, 30), ("fun", long, 2, 3, 0))
    for question, context, k, longest, stride in cases:
        for null in (False, True):
            want = pipeline_reference(lm.model, lm.tokenizer, question, context, top_k=k, max_answer_len=longest,
                                      handle_impossible_answer=null, max_seq_len=lm.max_length, doc_stride=stride)
            [a] = bv.answer(lm, question, context, n_best=k, max_answer_len=longest, stride=stride,
                            no_answer_threshold=0.0 if null else None)
            assert_same(as_pipeline(a, k, null), want)
            assert not a.no_answer and a.text == want[0]["answer"] == context[a.start : a.end]
            assert all(context[s.start : s.end] == s.text for s in a.n_best)
            if context is long:
                assert a.windows > 1


def test_several_questions_are_batched_and_answered_as_each_alone(qa_dir):
    lm = open_qa(qa_dir, "roberta")
    questions = [QUESTION, "is it fun", "what was it"]
    contexts = [CONTEXT, long_context(150, seed=5), long_context(20, seed=6)]
    together = bv.answer(lm, questions, contexts, n_best=3, stride=8, batch_size=2)
    alone = [bv.answer(lm, q, c, n_best=3, stride=8)[0] for q, c in zip(questions, contexts)]
    assert sum(a.windows for a in together) > 4  # windows of different questions share batches
    for t, a in zip(together, alone):
        assert (t.question, t.context, t.text, t.start, t.end, t.windows) == (a.question, a.context, a.text, a.start,
                                                                             a.end, a.windows)
        assert [(s.text, s.start, s.end) for s in t.n_best] == [(s.text, s.start, s.end) for s in a.n_best]
        np.testing.assert_allclose([s.score for s in t.n_best] + [t.no_answer_score],
                                   [s.score for s in a.n_best] + [a.no_answer_score], rtol=1e-5)
    shared = bv.answer(lm, questions[:2], CONTEXT)  # one context for every question
    assert [a.context for a in shared] == [CONTEXT, CONTEXT] and [a.question for a in shared] == questions[:2]


# --------------------------------------------------------------------------- windows
@pytest.mark.parametrize("family", ["bert", "roberta", "deberta-v2"])
def test_an_answer_past_the_first_window_is_found_at_its_characters(qa_dir, family):
    """A model steered to "joy": a context of ~300 words with "joy" once near its end is read in several windows,
    and the answer is that "joy", sliced from the context by its offsets."""
    lm = open_qa(qa_dir, family, "joy")
    context = long_context(300, seed=7) + " and joy at last"
    [a] = bv.answer(lm, QUESTION, context, stride=16)
    at = context.index("joy")
    assert a.windows > 3 and (a.text.strip(), a.start + len(a.text) - len(a.text.lstrip())) == ("joy", at)
    assert context[a.start : a.end] == a.text and not a.no_answer
    first = lm.tokenizer(QUESTION, context, truncation="only_second", max_length=lm.max_length,
                         return_offsets_mapping=True)
    assert a.start > max(e for (_, e), s in zip(first["offset_mapping"], first.sequence_ids()) if s == 1)
    want = pipeline_reference(lm.model, lm.tokenizer, QUESTION, context, top_k=3, max_answer_len=30,
                              max_seq_len=lm.max_length, doc_stride=16)
    assert_same(as_pipeline(bv.answer(lm, QUESTION, context, n_best=3, stride=16, no_answer_threshold=None)[0], 3,
                            False), want)


# --------------------------------------------------------------------------- no answer
@pytest.mark.parametrize("family", ["bert", "xlm-roberta"])
def test_no_answer_wins_or_loses_as_the_threshold_moves(qa_dir, family):
    """A model steered to its first position says "no answer" at threshold 0, as the pipeline's
    handle_impossible_answer does, and answers its best span once the threshold is moved up; a model steered to
    "joy" answers at 0 and says "no answer" once the threshold is moved down."""
    none = open_qa(qa_dir, family, "none")
    [a] = bv.answer(none, QUESTION, CONTEXT, n_best=3, stride=16)
    want = pipeline_reference(none.model, none.tokenizer, QUESTION, CONTEXT, top_k=3, handle_impossible_answer=True,
                              max_answer_len=30, max_seq_len=none.max_length, doc_stride=16)
    assert want[0]["answer"] == "" and a.no_answer and (a.text, a.start, a.end) == ("", 0, 0)
    assert a.score == a.no_answer_score and a.no_answer_score > 0.5 > a.n_best[0].score
    assert_same(as_pipeline(a, 3, True), want)
    gap = a.no_answer_score - a.n_best[0].score
    for threshold, no_answer in ((gap * 0.99, True), (gap * 1.01, False), (None, False)):
        [b] = bv.answer(none, QUESTION, CONTEXT, n_best=3, stride=16, no_answer_threshold=threshold)
        assert b.no_answer is no_answer and b.no_answer_score == pytest.approx(a.no_answer_score, rel=1e-6)
        if not no_answer:  # the best span
            assert (b.text, b.start, b.end, b.score) == (a.n_best[0].text, a.n_best[0].start, a.n_best[0].end,
                                                         a.n_best[0].score)
    joy = open_qa(qa_dir, family, "joy")
    context = CONTEXT.replace("joyless", "dull")
    [c] = bv.answer(joy, QUESTION, context, stride=16)
    assert not c.no_answer and c.text.strip() == "joy" and c.no_answer_score < c.score
    gap = c.score - c.no_answer_score
    for threshold, no_answer in ((-gap * 1.01, True), (-gap * 0.99, False)):
        [d] = bv.answer(joy, QUESTION, context, stride=16, no_answer_threshold=threshold)
        assert d.no_answer is no_answer and (d.text == "") is no_answer


def test_the_no_answer_score_is_the_lowest_over_the_windows(qa_dir):
    lm = open_qa(qa_dir, "bert")
    context = long_context(120, seed=2)
    [a] = bv.answer(lm, QUESTION, context, stride=8)
    enc = lm.tokenizer(QUESTION, context, truncation="only_second", max_length=lm.max_length, stride=8,
                       return_overflowing_tokens=True)
    nulls = []
    for ids, types in zip(enc["input_ids"], enc["token_type_ids"]):
        with torch.no_grad():
            out = lm.model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types]))
        mask = torch.tensor([[s == 1 or i == 0 for i, s in enumerate(enc.sequence_ids(len(nulls)))]])
        p = [torch.softmax(x.masked_fill(~mask, -10000.0), -1)[0, 0].item() for x in (out.start_logits,
                                                                                       out.end_logits)]
        nulls.append(p[0] * p[1])
    assert a.windows == len(nulls) > 2 and max(nulls) > 1.5 * min(nulls) > 0
    assert a.no_answer_score == pytest.approx(min(nulls), rel=1e-5)


def test_the_best_spans_are_every_pairs_best_in_a_stable_order_ties_included():
    """``best_spans`` scores only the band of ``max_len`` ends after each start and sorts only the candidates at or
    above the k-th best: against every (start, end) pair of the window scored and sorted stably (the decode as
    first written), on windows whose probabilities tie often (rounded to 2 digits), positions outside the context,
    ``max_len`` past the window and ``k`` past the spans there are."""
    from bertviz_app.models.answering import best_spans

    rng = np.random.default_rng(0)
    checked = tied = 0
    for _ in range(200):
        n = int(rng.integers(1, 40))
        p_start, p_end = (np.round(rng.dirichlet(np.ones(n)), 2) for _ in range(2))
        allowed = rng.random(n) < 0.8
        k, max_len = int(rng.integers(1, 60)), int(rng.integers(1, 50))
        pairs = [(p_start[s] * p_end[e], s, e) for s in range(n) for e in range(s, min(n, s + max_len))
                 if allowed[s] and allowed[e] and p_start[s] * p_end[e] > 0]
        want = [(s, e, score) for score, s, e in sorted(pairs, key=lambda x: (-x[0], x[1], x[2]))[:k]]
        got = best_spans(p_start, p_end, allowed, k, max_len)
        assert [(s, e) for s, e, _ in got] == [(s, e) for s, e, _ in want], (n, k, max_len)
        assert np.allclose([x for *_, x in got], [x for *_, x in want], rtol=1e-12, atol=0)
        checked += len(want)
        tied += len({x for *_, x in want}) < len(want)
    assert checked > 1000 and tied > 20  # the positive control: spans were found, and ties among them decided


def test_batches_padded_to_a_multiple_as_on_a_gpu_answer_as_exact_ones(qa_dir, gpu_padding):
    """On a CUDA device batches pad to a multiple of tokens (fewer shapes for attention's kernels to plan): the
    padding is masked and cut off, so answers, scores and no-answer scores are those of exact padding, contexts
    read in several windows too."""
    lm = open_qa(qa_dir, "bert")
    questions, contexts = [QUESTION, "was it fun", QUESTION], [CONTEXT, long_context(90, seed=3), "the film"]
    exact_widths = gpu_padding(1)
    exact = bv.answer(lm, questions, contexts, stride=8, batch_size=2)
    padded_widths = gpu_padding(16)
    padded = bv.answer(lm, questions, contexts, stride=8, batch_size=2)
    assert any(a.windows > 1 for a in exact)
    assert all(w % 16 == 0 or w == lm.max_length for w in padded_widths)  # the positive control: padding happened
    assert sum(padded_widths) > sum(exact_widths) and len(padded_widths) == len(exact_widths) > 1
    for a, b in zip(exact, padded):
        assert (a.text, a.start, a.end, a.no_answer) == (b.text, b.start, b.end, b.no_answer)
        assert [(s.start, s.end) for s in a.n_best] == [(s.start, s.end) for s in b.n_best]
        np.testing.assert_allclose([s.score for s in b.n_best], [s.score for s in a.n_best], rtol=1e-4)
        assert b.no_answer_score == pytest.approx(a.no_answer_score, rel=1e-4)


# --------------------------------------------------------------------------- refusals
def test_heads_are_refused_at_each_others_doors(qa_dir, signal_model_dir, tmp_path):
    """A QA model given to predict/explain/tag: an InputError naming its head and where to use it; a classifier
    or a tagger given to answer: likewise. Positive controls: each at its own door."""
    from test_tagging import build_tagger

    qa = open_qa(qa_dir)
    classifier = bv.load_model(str(signal_model_dir("bert")), device="cpu")
    tagger = bv.load_model(str(build_tagger("bert", tmp_path / "tagger")), device="cpu")
    for call in (lambda: bv.predict(qa, "the film"), lambda: bv.attribute(qa, "the film", n_steps=4),
                 lambda: bv.tag(qa, "the film"), lambda: service.explain(qa, "the film"),
                 lambda: service.predict(qa, "the film"), lambda: service.tag(qa, "the film")):
        with pytest.raises(InputError, match=r"is a question answering model \(BertForQuestionAnswering\): .*"
                                             r"Use answer \(bertviz-app answer"):
            call()
    for lm, head, door in ((classifier, "sequence classification", "Use predict"), (tagger, "token classification",
                                                                                     "Use tag")):
        with pytest.raises(InputError, match=f"is a {head} model .*needs a question answering model "
                                             f"\\(...ForQuestionAnswering\\). {door}"):
            bv.answer(lm, QUESTION, CONTEXT)
    assert bv.predict(classifier, "the film")[0].label in classifier.labels
    assert bv.answer(qa, QUESTION, CONTEXT)[0].text


def test_bad_input_gets_one_clear_message_each(qa_dir):
    lm = open_qa(qa_dir)
    for question, context, kwargs, message in (
            ("", CONTEXT, {}, "The question is empty"), ("   ", CONTEXT, {}, "The question is empty"),
            (QUESTION, "", {}, "The context is empty"), ([], CONTEXT, {}, "No question given"),
            (" ".join(["the film"] * 40), CONTEXT, {}, r"The question is 80 word-pieces; .* reads 64 in all.*"
                                                       r"shorten the question"),
            ([QUESTION, "is it"], [CONTEXT] * 3, {}, "2 questions but 3 contexts"),
            ([QUESTION, ""], CONTEXT, {}, "Question 2 is empty"),
            (QUESTION, CONTEXT, {"stride": 60}, r"stride 60 .*leaves no new context.*a stride below \d+"),
            (QUESTION, CONTEXT, {"n_best": 0}, "n_best must be a whole number of at least 1"),
            (QUESTION, CONTEXT, {"max_answer_len": 0}, "max_answer_len must be"),
            (QUESTION, CONTEXT, {"no_answer_threshold": float("nan")}, "no_answer_threshold must be a number"),
            (QUESTION, CONTEXT, {"attention": "flash"}, "attention must be one of")):
        with pytest.raises(InputError, match=message):
            bv.answer(lm, question, context, **kwargs)
    with pytest.raises(ModelNotFoundError):
        bv.load_model("./no-such-qa-model", device="cpu")


# --------------------------------------------------------------------------- the CLI
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_answer_json_and_lines(capsys, qa_dir):
    folder = str(qa_dir("electra"))
    want = bv.answer(bv.load_model(folder, device="cpu"), QUESTION, CONTEXT, n_best=3, stride=16)[0].to_dict()
    code, out, _ = run(capsys, "answer", "--question", QUESTION, "--context", CONTEXT, "--model", folder,
                       "--n-best", "3", "--stride", "16", "--json")
    assert code == 0
    got = json.loads(out)
    assert set(got) == {"question", "answer", "start", "end", "score", "no_answer", "no_answer_score", "n_best",
                        "windows"}
    assert {k: v for k, v in got.items() if "score" not in k and k != "n_best"} == {
        k: v for k, v in want.items() if "score" not in k and k != "n_best"}
    assert [(s["answer"], s["start"], s["end"]) for s in got["n_best"]] == [
        (s["answer"], s["start"], s["end"]) for s in want["n_best"]] and len(got["n_best"]) == 3
    np.testing.assert_allclose([got["score"], got["no_answer_score"]] + [s["score"] for s in got["n_best"]],
                               [want["score"], want["no_answer_score"]] + [s["score"] for s in want["n_best"]],
                               rtol=1e-6)
    assert CONTEXT[got["start"] : got["end"]] == got["answer"]
    code, out, _ = run(capsys, "answer", "--question", QUESTION, "--context", CONTEXT, "--model", folder)
    assert code == 0 and out.splitlines()[0].endswith(want["answer"]) and f"{want['start']}-{want['end']}" in out


def test_cli_answer_refusals_are_one_line(capsys, qa_dir, signal_model_dir):
    folder = str(qa_dir("bert"))
    for argv, message in ((["--question", "", "--context", CONTEXT, "--model", folder], "The question is empty"),
                          (["--question", QUESTION, "--context", " ", "--model", folder], "The context is empty"),
                          (["--question", QUESTION, "--context", CONTEXT, "--model", str(signal_model_dir("bert"))],
                           "is a sequence classification model"),
                          (["--question", QUESTION, "--context", CONTEXT, "--model", "./no-such-qa"],
                           "does not exist")):
        code, out, err = run(capsys, "answer", *argv)
        assert code == 2 and out == "" and err.startswith("error: ") and message in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, err = run(capsys, "predict", "the film", "--model", folder)
    assert code == 2 and "is a question answering model" in err and "Use answer" in err


# --------------------------------------------------------------------------- the JSON API and gradio's API
def test_v1_answer_over_http_answers_the_librarys_json_and_refuses_clearly(qa_dir, signal_model_dir, tmp_path):
    from conftest import served_app

    folder = str(qa_dir("deberta-v2"))
    want = bv.answer(bv.load_model(folder, device="cpu"), QUESTION, CONTEXT, n_best=2, max_answer_len=6,
                     stride=16)[0].to_dict()
    with served_app(folder, BERTVIZ_MODELS_DIR=tmp_path) as url:
        r = httpx.post(f"{url}v1/answer", json={"question": QUESTION, "context": CONTEXT, "n_best": 2,
                                                "max_answer_len": 6, "stride": 16}, timeout=60)
        assert r.status_code == 200, r.text
        got = r.json()
        assert {k: v for k, v in got.items() if "score" not in k and k != "n_best"} == {
            k: v for k, v in want.items() if "score" not in k and k != "n_best"}
        assert [(s["answer"], s["start"], s["end"]) for s in got["n_best"]] == [
            (s["answer"], s["start"], s["end"]) for s in want["n_best"]]
        np.testing.assert_allclose([got["score"]] + [s["score"] for s in got["n_best"]],
                                   [want["score"]] + [s["score"] for s in want["n_best"]], rtol=1e-6)
        for body, status, message in (({"question": "", "context": CONTEXT}, 400, "The question is empty"),
                                      ({"question": QUESTION, "context": ""}, 400, "The context is empty"),
                                      ({"question": QUESTION, "context": CONTEXT, "model":
                                        str(signal_model_dir("bert"))}, 400, "is a sequence classification model"),
                                      ({"question": QUESTION, "context": CONTEXT, "model": "nobody/no-such-model"},
                                       404, ""),
                                      ({"question": QUESTION, "context": CONTEXT, "n_best": 0}, 400, "n_best must be"),
                                      ({"question": QUESTION, "context": CONTEXT, "topk": 2}, 422, "topk")):
            r = httpx.post(f"{url}v1/answer", json=body, timeout=60)
            assert r.status_code == status, (body, r.text)
            assert set(r.json()) == {"error"} and message in r.json()["error"] and "Traceback" not in r.text
        r = httpx.post(f"{url}v1/predict", json={"text": "the film"}, timeout=60)  # the QA model at predict
        assert r.status_code == 400 and "is a question answering model" in r.json()["error"]
        schema = httpx.get(f"{url}openapi.json", timeout=30).json()
        assert "/v1/answer" in schema["paths"] and "AnswerResponse" in schema["components"]["schemas"]

        # gradio's /answer over raw HTTP: POST the call, then read its event stream
        def call(data):
            started = httpx.post(f"{url}gradio_api/call/answer", json={"data": data}, timeout=60)
            started.raise_for_status()
            text = httpx.get(f"{url}gradio_api/call/answer/{started.json()['event_id']}", timeout=120).text
            event, _, payload = text.strip().rpartition("\ndata:")
            return event.rsplit("event:", 1)[-1].strip(), json.loads(payload)

        event, data = call([QUESTION, CONTEXT, folder, 2, 6, 0.0, 16])
        assert event == "complete", data
        assert {k: v for k, v in data[0].items() if "score" not in k and k != "n_best"} == {
            k: v for k, v in want.items() if "score" not in k and k != "n_best"}
        assert [(s["answer"], s["start"], s["end"]) for s in data[0]["n_best"]] == [
            (s["answer"], s["start"], s["end"]) for s in want["n_best"]]
        event, data = call(["", CONTEXT, folder, 2, 6, 0.0, 16])
        assert event == "error" and "The question is empty" in json.dumps(data), data


def test_the_pages_model_lists_offer_a_question_answering_model(models_dir, settings):
    """The page answers questions (tests/test_qa_page.py), so its model lists (the Model tab, the fine-tune base: a
    classifier trains from a reader's encoder) offer a question answering model beside a classifier run, as the
    library lists both."""
    from bertviz_app.ui import build_panel, model_loading

    build_qa("bert", models_dir / "runs" / "reader")
    make_tiny_model(models_dir / "runs" / "r1")
    for names in (model_loading.model_choices("default", settings), build_panel.choices("default", settings)):
        assert "runs/r1" in names and "runs/reader" in names
    assert {"runs/r1", "runs/reader"} <= {m["name"] for m in bv.list_models(models_dir)}
