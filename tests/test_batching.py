"""The micro-batcher behind /predict and /explain: concurrent callers are gathered into shared
batches, and each gets exactly its own result or its own error (a bad text never fails another)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from bertviz_app import InputError, attribute, explain_one, predict, predict_one
from bertviz_app.service.batching import MicroBatcher, batcher_stats


def test_waiting_callers_share_one_batch_and_get_their_own_results():
    started, release = threading.Event(), threading.Event()
    sizes = []

    def run(key, payloads):
        sizes.append(len(payloads))
        if len(sizes) == 1:  # hold the worker on the first item so the others pile up behind it
            started.set()
            release.wait(10)
        return [p * 10 for p in payloads]

    b = MicroBatcher(run, max_batch=64, max_wait_s=0.001)
    out = {}
    first = threading.Thread(target=lambda: out.__setitem__(0, b.submit("k", 0)))
    first.start()
    assert started.wait(10)
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, b.submit("k", i))) for i in range(1, 9)]
    for t in threads:
        t.start()
    while b.waiting < 8:  # all eight queued behind the busy worker
        threading.Event().wait(0.005)
    release.set()
    for t in [first, *threads]:
        t.join(10)
    assert out == {i: i * 10 for i in range(9)}
    assert sizes == [1, 8]  # the eight waiting callers ran as one batch


def test_items_with_different_keys_never_share_a_batch():
    seen = []
    gate = threading.Event()

    def run(key, payloads):
        gate.wait(10)
        seen.append((key, list(payloads)))
        return [(key, p) for p in payloads]

    b = MicroBatcher(run)
    out = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, b.submit(i % 2, i))) for i in range(6)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert out == {i: (i % 2, i) for i in range(6)}
    assert all(all(p % 2 == key for p in ps) for key, ps in seen)


def test_a_failing_batch_fails_only_the_item_that_fails():
    def run(key, payloads):
        if "boom" in payloads:
            raise ValueError("boom cannot be served")
        return [p.upper() for p in payloads]

    b = MicroBatcher(run)
    gate = threading.Barrier(5)
    out, errs = {}, {}

    def call(i, p):
        gate.wait(10)
        try:
            out[i] = b.submit("k", p)
        except ValueError as exc:
            errs[i] = str(exc)

    payloads = ["a", "b", "boom", "c", "d"]
    threads = [threading.Thread(target=call, args=(i, p)) for i, p in enumerate(payloads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert out == {0: "A", 1: "B", 3: "C", 4: "D"}
    assert errs == {2: "boom cannot be served"}


GOOD = ["the film was good", "a tedious slog !", "it is not fun", "the movie is great , moving .",
        "awful , joyless film", "gorgeous"]
BAD = ["", "   ", None, "x" * 10**6]


def test_concurrent_mixed_good_and_bad_texts_each_get_their_own_answer(signal):
    """On the trained fixture (answers 0.02 to 0.99, both labels among the texts): every caller gets its
    own text's answer, to float rounding, whatever batch it shared; a bad text fails only its caller."""
    expected = {t: p for t, p in zip(GOOD, predict(signal, GOOD))}
    assert {p.label for p in expected.values()} == {"negative", "positive"}
    jobs = [(t, True) for t in GOOD * 3] + [(t, False) for t in BAD * 2]
    np.random.default_rng(0).shuffle(jobs)
    barrier = threading.Barrier(len(jobs))
    results: dict[int, object] = {}

    def call(i, text):
        barrier.wait(30)
        try:
            results[i] = predict_one(signal, text)
        except InputError as exc:
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i, t)) for i, (t, _) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i, (text, good) in enumerate(jobs):
        got = results[i]
        if good:
            assert not isinstance(got, Exception), (text, got)
            assert got.text == text
            assert got.label == expected[text].label
            np.testing.assert_allclose(got.probs, expected[text].probs, rtol=1e-4, atol=1e-7)
        else:
            assert isinstance(got, InputError), (text, got)
            assert "empty" in str(got) or "limit" in str(got) or "string" in str(got)
    batches, items = batcher_stats(signal)["predict"]
    assert items >= len(GOOD) * 3


def test_predict_one_checks_options_in_the_callers_thread(tiny):
    with pytest.raises(InputError, match="pool"):
        predict_one(tiny, "good film", window=True, pool="median")
    with pytest.raises(InputError, match="stride"):
        predict_one(tiny, "good film", window=True, stride=10**6)


def test_concurrent_explanations_match_attribute(signal):
    """Explanations computed concurrently (shared batches) equal attribute's and the independent
    reference (conftest.check_against_reference), on texts of both labels."""
    from conftest import check_against_reference

    texts = ["the film was good", "a tedious slog !", "it is not fun"]
    results = {}
    barrier = threading.Barrier(len(texts) + 1)

    def call(i, text):
        barrier.wait(30)
        try:
            results[i] = explain_one(signal, text, n_steps=8)
        except InputError as exc:
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i, t)) for i, t in enumerate(texts + [""])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert isinstance(results[len(texts)], InputError)
    for i, text in enumerate(texts):
        want = attribute(signal, text, n_steps=8)
        assert results[i].info.text == text and results[i].target == want.target
        gap = check_against_reference(signal, results[i], text, n_steps=8)
        np.testing.assert_allclose(results[i].scores, want.scores, rtol=0, atol=1e-4 * abs(gap))
    assert {results[i].target for i in range(len(texts))} == {"negative", "positive"}


# --------------------------------------------------------------------------- sliding window
def test_window_on_a_short_text_equals_plain_predict(tiny):
    plain = predict(tiny, "the film was good")[0]
    win = predict(tiny, "the film was good", window=True, stride=16)[0]
    np.testing.assert_allclose(win.probs, plain.probs, atol=1e-5)
    assert win.windows == 1 and not win.truncated and win.n_tokens == plain.n_tokens


@pytest.mark.parametrize("pool", ["mean", "max"])
def test_window_reads_all_of_a_long_text(tiny, pool):
    long = "the film was good . " * 40 + "awful tedious slog " * 30  # far past the tiny model's 64 tokens
    plain = predict(tiny, long)[0]
    assert plain.truncated
    win = predict(tiny, long, window=True, stride=16, pool=pool)[0]
    n_text = len(tiny.tokenizer(long, add_special_tokens=False)["input_ids"])
    assert not win.truncated
    assert win.n_tokens == n_text + 2  # every token of the text, plus [CLS] and [SEP]
    assert win.windows == -(-(n_text - 16) // (62 - 16))  # windows of 62 text tokens advancing by 46
    assert sum(win.probs) == pytest.approx(1.0, abs=1e-5)
    assert win.to_dict()["windows"] == win.windows
    # pooled logits: the same as pooling the windows' own logits by hand
    enc = tiny.tokenizer(long, truncation=True, max_length=64, stride=16, return_overflowing_tokens=True)
    texts = [tiny.tokenizer.decode(ids[1:-1]) for ids in enc["input_ids"]]
    import torch

    with torch.no_grad():
        batch = tiny.tokenizer(texts, padding=True, return_tensors="pt")
        logits = tiny.model(**batch).logits.numpy()  # (W, C)
    pooled = logits.mean(0) if pool == "mean" else logits.max(0)
    want = np.exp(pooled - pooled.max())
    np.testing.assert_allclose(win.probs, want / want.sum(), atol=1e-4)


def test_an_idle_worker_ends_and_a_new_one_starts_on_demand(monkeypatch):
    """No thread is left behind by an unloaded model: the worker ends after IDLE_EXIT_S without
    work, and the next caller starts a new one and still gets its answer."""
    import bertviz_app.service.batching as batching

    monkeypatch.setattr(batching, "IDLE_EXIT_S", 0.05)
    b = MicroBatcher(lambda key, payloads: [p + 1 for p in payloads], max_wait_s=0.001)
    assert b.submit("k", 1) == 2
    first = b.worker
    first.join(5)
    assert not first.is_alive() and b.worker is None
    assert b.submit("k", 2) == 3 and b.worker is not first
    # many callers racing the idle exit: every one is answered
    out = {}
    for round_ in range(20):
        threading.Event().wait(0.04 + 0.001 * round_)  # around the exit deadline
        ts = [threading.Thread(target=lambda i=i, r=round_: out.__setitem__((r, i), b.submit("k", i)))
              for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(5)
    assert out == {(r, i): i + 1 for r in range(20) for i in range(4)}
