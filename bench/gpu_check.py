"""The CUDA paths, checked and timed against peers in the same run (needs a GPU; CI never runs it).

Three random MiniLM-shaped models (6 layers, 384 wide, 12 heads; built from configs, no download) with a small
word-level vocabulary, each loaded three ways: CPU fp32, CUDA fp32 and CUDA bf16 (the product's default on a
GPU). Every comparison below is against CPU fp32 on the same inputs, and every throughput row's peers are
measured in the same run.

The sequence classifier:
- predictions: CUDA bf16/fp32 probabilities against CPU fp32 (max abs difference, argmax agreement);
- the forward wrapper (per-call kernel, [CLS]-only last layer) against ``model(**inputs)`` on CUDA;
- Integrated Gradients on CUDA: completeness (relative delta) and agreement with the CPU scores;
- the micro-batcher: 64 threads call ``predict_one`` at once and each gets its own text's answer;
- fine-tuning through the core service (``plan_finetune -> run_plan``) on the GPU with bf16;
- throughput (texts/s) of CUDA bf16 and fp32 against CPU fp32.

The token classifier (a tagger, ``BertForTokenClassification`` over O, B-PER, I-PER, B-LOC, I-LOC, B-ORG, I-ORG;
its head seeded so most words are O), ``check_tagger``:
- ``bv.tag`` on texts of 8-120 words and a few past one 512-token window: per-word tag agreement and entity
  agreement of CUDA bf16/fp32 with CPU fp32, max abs difference of the per-piece probabilities and word scores;
- ``bv.explain_entities`` (Integrated Gradients, 64 fixed steps, the text's first entity, else one word-piece's
  label) on CUDA fp32 and on the bf16 model (its attributions use an fp32 copy): relative delta and the
  correlation of its scores with the CPU scores;
- throughput (sentences/s and words/s) of CUDA bf16 and fp32 against CPU fp32 (the CPU on fewer sentences).

The question answering reader (``BertForQuestionAnswering``, 384-token windows sharing 128 tokens as SQuAD's
run_qa.py reads them; its span head seeded), ``check_reader``:
- ``bv.answer`` on 32 question/context pairs (contexts of 100-400 words, every fourth one past one window so the
  stride path runs): answer agreement (same start and end characters, same "no answer") of CUDA bf16/fp32 with
  CPU fp32, max abs difference of the span score and the no-answer score;
- ``bv.explain_answer`` (the CPU's answer span, 64 fixed steps) on CUDA fp32 and on the bf16 model: relative
  delta and correlation with the CPU scores;
- throughput (questions/s) of CUDA bf16 and fp32 against CPU fp32 (the CPU on fewer questions).

Fine-tunes on a tiny synthetic file (``check_finetunes``): a tagger (``plan_tagger -> run_tagger_plan``, CoNLL)
and a reader (``plan_reader -> run_reader_plan``, SQuAD JSON) from the classifier's weights, on the GPU (bf16
when supported): seconds, whether bf16 was used, the headline metric (entity F1; exact match and F1) and the
verdict.

Each section runs in its own try: one that fails records ``{"error": ...}`` under its key and the others still
report. ``--device cpu`` is only for a dry run without a GPU: every "cuda" load uses the CPU in fp32 (the
``cuda_*`` rows then compare the CPU with itself; ``dtypes`` says what each row ran in); pair it with a small
``--n``, which also scales the sample sizes down.

    python bench/gpu_check.py [--out bench/out/gpu_check.json]
    python bench/gpu_check.py --device cpu --n 32 --out bench/out/gpu_dry.json   # dry run, no GPU
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import bertviz_app as bv  # noqa: E402
from bertviz_app.config import Settings  # noqa: E402
from bertviz_app.models.forward import classifier_logits  # noqa: E402

from conftest import VOCAB  # noqa: E402

SETTINGS = Settings.from_env()  # an entry point: BERTVIZ_* read once, here
WORDS = [w for w in VOCAB if w.isalpha() and len(w) > 1]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
READER_WINDOW = 384  # run_qa.py's max_seq_length; answer's default stride is then 128
IG_STEPS = 64


# ------------------------------------------------------------------------------------------------ models
def _tokenizer(path: Path, max_length: int = 512):
    from transformers import BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab=str(path / "vocab.txt"), do_lower_case=True, model_max_length=max_length)


def _config(labels: list[str]):
    from transformers import BertConfig

    return BertConfig(vocab_size=len(VOCAB), hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                      intermediate_size=1536, max_position_embeddings=512, num_labels=len(labels),
                      id2label=dict(enumerate(labels)), label2id={lab: i for i, lab in enumerate(labels)})


def build_model(path: Path) -> Path:
    from transformers import BertForSequenceClassification

    tok = _tokenizer(path)
    torch.manual_seed(0)
    BertForSequenceClassification(_config(["negative", "positive"])).save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def build_tagger(path: Path) -> Path:
    """A token classifier over ``TAGS``; its head N(0, 0.1^2) (logits of a few units on the encoder's unit-scale
    states, not the near-uniform 0.02 init) with O's bias +4, so most words are O and some are entities."""
    from transformers import BertForTokenClassification

    tok = _tokenizer(path)
    torch.manual_seed(0)
    model = BertForTokenClassification(_config(TAGS))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model.classifier.weight.copy_(0.1 * torch.randn(model.classifier.weight.shape, generator=gen))
        model.classifier.bias.zero_()
        model.classifier.bias[0] = 4.0
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def build_reader(path: Path) -> Path:
    """A question answering model (span head N(0, 0.15^2), as bench/answering.py seeds one) reading windows of
    ``READER_WINDOW`` tokens."""
    from transformers import BertForQuestionAnswering

    tok = _tokenizer(path, READER_WINDOW)
    torch.manual_seed(0)
    model = BertForQuestionAnswering(_config(["start", "end"]))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model.qa_outputs.weight.copy_(0.15 * torch.randn(model.qa_outputs.weight.shape, generator=gen))
        model.qa_outputs.bias.zero_()
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def load_three(path: Path, device: str) -> dict:
    """{"cpu_fp32", "cuda_fp32", "cuda_bf16"}: the folder loaded three ways (``device="cpu"``: the cuda ones on the
    CPU, in fp32)."""
    return {"cpu_fp32": bv.load_model(str(path), device="cpu", settings=SETTINGS),
            "cuda_fp32": bv.load_model(str(path), device=device, gpu_dtype="fp32", settings=SETTINGS),
            "cuda_bf16": bv.load_model(str(path), device=device, settings=SETTINGS)}


def dtypes(lms: dict) -> dict:
    return {k: f"{lm.device.type} {str(next(lm.predict_model().parameters()).dtype).replace('torch.', '')}"
            for k, lm in lms.items()}


# ------------------------------------------------------------------------------------------------ inputs
def texts(n: int, seed: int = 0, low: int = 8, high: int = 300) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))) for _ in range(n)]


def qa_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` (question, context) pairs: contexts of 100-400 words, every fourth one 380-400 words (past one
    ``READER_WINDOW``-token window with the question), questions of 5-8 words."""
    rng = random.Random(seed)
    questions, contexts = [], []
    for i in range(n):
        size = rng.randint(380, 400) if i % 4 == 3 else rng.randint(100, 360)
        contexts.append(" ".join(rng.choice(WORDS) for _ in range(size)))
        questions.append("what was the " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 5))))
    return questions, contexts


def corr(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.size < 2:
        return float("nan")
    if np.allclose(a, b):
        return 1.0
    return float(np.corrcoef(a, b)[0, 1])


def sync(lm) -> None:
    if lm.device.type == "cuda":
        torch.cuda.synchronize()


def best_seconds(lm, call, items: list, repeats: int = 3) -> float:
    call(lm, items[: min(len(items), 32)])  # warm-up
    sync(lm)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        call(lm, items)
        sync(lm)
        best = min(best, time.perf_counter() - t0)
    return best


def rate(lm, items: list[str], repeats: int = 3) -> float:
    return len(items) / best_seconds(lm, bv.predict, items, repeats)


def section(out: dict, key: str | None, fn, *args) -> None:
    """Run one section: its numbers under ``key`` (None: merged into ``out``), or its error there."""
    t0 = time.perf_counter()
    try:
        got = fn(*args)
        got["section_seconds"] = round(time.perf_counter() - t0, 1)
        if key is None:
            out.update(got)
        else:
            out[key] = got
    except Exception as exc:  # noqa: BLE001 - recorded, the other sections still run
        traceback.print_exc()
        out[key or "classifier"] = {"error": repr(exc), "section_seconds": round(time.perf_counter() - t0, 1)}
    print(f"[gpu_check] {key or 'classifier'}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------ classifier
def check_classifier(path: Path, device: str, n: int, n_sample: int, n_ig: int) -> dict:
    """The sequence classifier's checks (the keys this script has always written, at the top level)."""
    lms = load_three(path, device)
    cpu, g32, gbf = lms["cpu_fp32"], lms["cuda_fp32"], lms["cuda_bf16"]
    out: dict = {"default_cuda_dtype": str(next(gbf.predict_model().parameters()).dtype)}

    sample = texts(n_sample, seed=1)
    p_cpu = np.array([p.probs for p in bv.predict(cpu, sample)])
    for name, lm in (("cuda_fp32", g32), ("cuda_bf16", gbf)):
        p = np.array([q.probs for q in bv.predict(lm, sample)])
        out[f"{name}_max_abs_prob_diff_vs_cpu"] = float(np.abs(p - p_cpu).max())
        out[f"{name}_argmax_agreement_vs_cpu"] = float((p.argmax(1) == p_cpu.argmax(1)).mean())

    # forward wrapper vs the model's own forward on CUDA, padded batch, both kernels
    enc = g32.tokenizer(sample[:16], padding=True, truncation=True, max_length=512, return_tensors="pt")
    enc = enc.to(g32.device)
    model = g32.predict_model()
    with torch.inference_mode():
        ref = model(**enc).logits
        for kernel in ("eager", "sdpa"):
            for cls_only in (False, True):
                got = classifier_logits(model, **enc, attention=kernel, cls_only=cls_only)
                out[f"wrapper_fp32_{kernel}_cls_only={cls_only}_max_abs_diff"] = float((got - ref).abs().max())

    # Integrated Gradients on CUDA vs CPU
    deltas, corrs = [], []
    for text in sample[:n_ig]:
        a_gpu = bv.attribute(g32, text, n_steps=IG_STEPS)
        a_cpu = bv.attribute(cpu, text, n_steps=IG_STEPS)
        deltas.append(a_gpu.relative_delta)
        corrs.append(corr(a_gpu.scores, a_cpu.scores))
    out["ig_cuda_relative_delta_max"] = float(max(deltas))
    out["ig_cuda_vs_cpu_score_correlation_min"] = float(min(corrs))

    # micro-batcher: 64 concurrent callers, each must get its own text back
    wrong, errors = [], []
    many = texts(64, seed=2)

    def call(i: int) -> None:
        try:
            pred = bv.predict_one(gbf, many[i])
            if pred.text != many[i]:
                wrong.append(i)
        except Exception as exc:  # noqa: BLE001 - counted and reported
            errors.append(repr(exc))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["batcher_64_threads_wrong"] = len(wrong)
    out["batcher_64_threads_errors"] = errors[:3]

    # throughput, peers in the same run
    items = texts(n, seed=3)
    r_cpu = rate(cpu, items[: max(64, n // 8)], repeats=1)
    r_32 = rate(g32, items)
    r_bf = rate(gbf, items)
    out["predict_texts_per_s"] = {"cpu_fp32": round(r_cpu, 1), "cuda_fp32": round(r_32, 1), "cuda_bf16": round(r_bf, 1)}
    out["ratio_cuda_bf16_vs_cpu_fp32"] = round(r_bf / r_cpu, 1)
    out["ratio_cuda_bf16_vs_cuda_fp32"] = round(r_bf / r_32, 2)
    return out


def check_classifier_finetune(tmp: Path, base: Path, n_rows: int = 400) -> dict:
    """Fine-tune through the core service on the GPU (bf16 when supported)."""
    import pandas as pd

    rng = random.Random(4)
    rows = [{"text": " ".join(rng.choice(["good", "great", "fun"] if y else ["bad", "awful", "boring"])
                                for _ in range(12)), "label": "positive" if y else "negative"}
            for y in [i % 2 for i in range(n_rows)]]
    csv = tmp / "train.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    t0 = time.perf_counter()
    plan = bv.plan_finetune(str(csv), base=str(base), name="gpu-check", epochs=2,
                            settings=Settings(models_dir=tmp / "models"))
    res = bv.run_plan(plan)[-1]
    return {"seconds": round(time.perf_counter() - t0, 1), "accuracy": res.metrics.get("accuracy"),
            "bf16": res.hyperparameters.get("bf16"), "verdict": res.verdict.status if res.verdict else None,
            "examples_per_second": res.examples_per_second}


# ------------------------------------------------------------------------------------------------ tagger
def _tag_rows(lms: dict, sample: list[str]) -> dict:
    """Agreement of each cuda model's taggings with the CPU's on ``sample``."""
    ref = bv.tag(lms["cpu_fp32"], sample)
    out: dict = {"texts": len(sample), "words": sum(len(t.words) for t in ref),
                 "entities_cpu": sum(len(t.entities) for t in ref), "windowed_texts": sum(t.windows > 1 for t in ref)}
    for name in ("cuda_fp32", "cuda_bf16"):
        got = bv.tag(lms[name], sample)
        same_words = total = 0
        prob_diff = score_diff = 0.0
        for a, b in zip(got, ref):
            if len(a.words) != len(b.words) or a.tokens != b.tokens:
                raise AssertionError(f"{name}: the words or pieces of a text differ from the CPU's")
            same_words += sum(x.label == y.label for x, y in zip(a.words, b.words))
            total += len(b.words)
            prob_diff = max(prob_diff, float(np.abs(a.probs - b.probs).max()))
            score_diff = max(score_diff, max(abs(x.score - y.score) for x, y in zip(a.words, b.words)))
        same_entities = sum([(e.start, e.end, e.label) for e in a.entities] == [(e.start, e.end, e.label)
                                                                                 for e in b.entities]
                            for a, b in zip(got, ref))
        out[name] = {"word_tag_agreement_vs_cpu": round(same_words / total, 5),
                     "text_entities_identical_vs_cpu": round(same_entities / len(sample), 4),
                     "max_abs_piece_prob_diff_vs_cpu": prob_diff, "max_abs_word_score_diff_vs_cpu": score_diff}
    return out


def _entity_ig(lms: dict, sample: list[str]) -> dict:
    """``explain_entities`` on each cuda model vs the CPU: the text's first entity (the CPU's), else the label
    the CPU gives its middle piece; a target the cuda tagging does not share is counted, not compared."""
    cpu = lms["cpu_fp32"]
    out: dict = {"n_steps": IG_STEPS, "texts": len(sample)}
    refs = []
    for text in sample:
        t = bv.tag(cpu, text)[0]
        if t.entities:
            kw = {"entities": 0}
        else:
            k = len(t.tokens) // 2
            kw = {"token": k, "label": t.labels[k]}
        refs.append((text, kw, bv.explain_entities(cpu, text, n_steps=IG_STEPS, **kw)[0]))
    out["entity_targets"] = sum("entities" in kw for _, kw, _ in refs)
    out["cpu_relative_delta_max"] = max(r.relative_delta for _, _, r in refs)
    key = lambda r: (r.target.start, r.target.end, r.target.piece_labels, r.window)  # noqa: E731
    for name in ("cuda_fp32", "cuda_bf16"):
        deltas, corrs, other = [], [], 0
        for text, kw, ref in refs:
            a = bv.explain_entities(lms[name], text, n_steps=IG_STEPS, **kw)[0]
            deltas.append(a.relative_delta)
            if key(a) != key(ref):
                other += 1
                continue
            corrs.append(corr(a.scores, ref.scores))
        out[name] = {"relative_delta_max": float(max(deltas)), "relative_delta_median": float(np.median(deltas)),
                     "score_correlation_vs_cpu_min": float(min(corrs)) if corrs else None,
                     "targets_differing_from_cpu": other}
    return out


def check_tagger(tmp: Path, device: str, n: int, n_sample: int, n_ig: int) -> dict:
    path = build_tagger(tmp / "tagger")
    lms = load_three(path, device)
    out: dict = {"dtypes": dtypes(lms), "labels": TAGS}
    # 8-120 words, and every eighth text 500-800 words (two or more 512-token windows)
    sample = [t if i % 8 else texts(1, seed=100 + i, low=500, high=800)[0]
              for i, t in enumerate(texts(n_sample, seed=11, low=8, high=120))]
    out["agreement"] = _tag_rows(lms, sample)
    out["entity_ig"] = _entity_ig(lms, texts(n_ig, seed=12, low=10, high=40))

    items = texts(n, seed=13, low=8, high=60)  # sentence-like
    cpu_items = items[: max(32, n // 8)]
    rates = {}
    for name, lm in lms.items():
        these = cpu_items if name == "cpu_fp32" else items
        seconds = best_seconds(lm, bv.tag, these, repeats=1 if name == "cpu_fp32" else 3)
        words = sum(len(s.split()) for s in these)
        rates[name] = {"sentences": len(these), "sentences_per_s": round(len(these) / seconds, 1),
                       "words_per_s": round(words / seconds, 1)}
    out["throughput"] = rates
    out["ratio_cuda_bf16_vs_cpu_fp32"] = round(rates["cuda_bf16"]["words_per_s"] / rates["cpu_fp32"]["words_per_s"], 1)
    out["ratio_cuda_bf16_vs_cuda_fp32"] = round(rates["cuda_bf16"]["words_per_s"]
                                                / rates["cuda_fp32"]["words_per_s"], 2)
    return out


# ------------------------------------------------------------------------------------------------ reader
def _answer_rows(lms: dict, questions: list[str], contexts: list[str]) -> tuple[dict, list]:
    ref = bv.answer(lms["cpu_fp32"], questions, contexts)
    out: dict = {"questions": len(questions), "windowed_questions": sum(a.windows > 1 for a in ref),
                 "windows": sum(a.windows for a in ref), "no_answer_cpu": sum(a.no_answer for a in ref),
                 "context_words": [min(len(c.split()) for c in contexts), max(len(c.split()) for c in contexts)]}
    for name in ("cuda_fp32", "cuda_bf16"):
        got = bv.answer(lms[name], questions, contexts)
        same = sum((a.start, a.end, a.no_answer) == (b.start, b.end, b.no_answer) for a, b in zip(got, ref))
        out[name] = {"answer_agreement_vs_cpu": round(same / len(ref), 4),
                     "max_abs_score_diff_vs_cpu": max(abs(a.score - b.score) for a, b in zip(got, ref)),
                     "max_abs_no_answer_score_diff_vs_cpu": max(abs(a.no_answer_score - b.no_answer_score)
                                                                for a, b in zip(got, ref)),
                     "max_abs_score_diff_same_answer": max([abs(a.score - b.score) for a, b in zip(got, ref)
                                                            if (a.start, a.end) == (b.start, b.end)], default=None)}
    return out, ref


def _span_ig(lms: dict, questions: list[str], contexts: list[str], ref: list, n_ig: int) -> dict:
    """``explain_answer`` of the CPU's answer (its characters; "no-answer" where it had none) on the shortest
    one-window contexts, on each cuda model vs the CPU."""
    cpu = lms["cpu_fp32"]
    order = sorted((i for i in range(len(ref)) if ref[i].windows == 1), key=lambda i: len(contexts[i]))[:n_ig]
    out: dict = {"n_steps": IG_STEPS, "questions": len(order),
                 "context_words": [len(contexts[i].split()) for i in order]}
    refs = []
    for i in order:
        span = "no-answer" if ref[i].no_answer else (ref[i].start, ref[i].end)
        refs.append((i, span, bv.explain_answer(cpu, questions[i], contexts[i], span=span, n_steps=IG_STEPS)[0]))
    out["cpu_relative_delta_max"] = max(r.relative_delta for _, _, r in refs)
    for name in ("cuda_fp32", "cuda_bf16"):
        deltas, corrs, other = [], [], 0
        for i, span, r in refs:
            a = bv.explain_answer(lms[name], questions[i], contexts[i], span=span, n_steps=IG_STEPS)[0]
            deltas.append(a.relative_delta)
            if (a.target.first, a.target.last, a.window) != (r.target.first, r.target.last, r.window):
                other += 1
                continue
            corrs.append(corr(a.scores, r.scores))
        out[name] = {"relative_delta_max": float(max(deltas)), "relative_delta_median": float(np.median(deltas)),
                     "score_correlation_vs_cpu_min": float(min(corrs)) if corrs else None,
                     "targets_differing_from_cpu": other}
    return out


def check_reader(tmp: Path, device: str, n: int, n_sample: int, n_ig: int) -> dict:
    path = build_reader(tmp / "reader")
    lms = load_three(path, device)
    out: dict = {"dtypes": dtypes(lms), "window": lms["cpu_fp32"].max_length}
    questions, contexts = qa_pairs(n_sample, seed=21)
    out["agreement"], ref = _answer_rows(lms, questions, contexts)
    out["span_ig"] = _span_ig(lms, questions, contexts, ref, n_ig)

    qs, cs = qa_pairs(max(16, n // 2), seed=22)
    pairs = list(zip(qs, cs))
    call = lambda lm, items: bv.answer(lm, [q for q, _ in items], [c for _, c in items])  # noqa: E731
    rates = {}
    for name, lm in lms.items():
        these = pairs[: max(16, len(pairs) // 8)] if name == "cpu_fp32" else pairs
        seconds = best_seconds(lm, call, these, repeats=1 if name == "cpu_fp32" else 3)
        rates[name] = {"questions": len(these), "questions_per_s": round(len(these) / seconds, 1)}
    out["throughput"] = rates
    out["ratio_cuda_bf16_vs_cpu_fp32"] = round(rates["cuda_bf16"]["questions_per_s"]
                                               / rates["cpu_fp32"]["questions_per_s"], 1)
    out["ratio_cuda_bf16_vs_cuda_fp32"] = round(rates["cuda_bf16"]["questions_per_s"]
                                                / rates["cuda_fp32"]["questions_per_s"], 2)
    return out


# ------------------------------------------------------------------------------------------------ fine-tunes
def _tagged_sentences(n: int, seed: int) -> str:
    """CoNLL text: sentiment words are entities (good, great, fun: POS; bad, awful, tedious: NEG; "gorgeous
    moving" one POS entity of two words), every other word O (tests/test_tagger_training.py's task)."""
    rng = random.Random(seed)
    filler, pos, neg = ["the", "film", "movie", "was", "is", "a", "it"], ["good", "great", "fun"], \
        ["bad", "awful", "tedious"]
    out = []
    for _ in range(n):
        rows = []
        for _ in range(rng.randint(3, 7)):
            roll = rng.random()
            if roll < 0.15:
                rows += ["gorgeous\tB-POS", "moving\tI-POS"]
            elif roll < 0.35:
                kind = rng.choice(["POS", "NEG"])
                rows.append(f"{rng.choice(pos if kind == 'POS' else neg)}\tB-{kind}")
            else:
                rows.append(f"{rng.choice(filler)}\tO")
        out.append("\n".join(rows))
    return "\n\n".join(out) + "\n"


def _squad(n: int, seed: int) -> dict:
    """SQuAD 2.0 JSON: "what was the film" of a context of filler words holding one verdict word, a fifth with
    none (tests/test_answer_finetune.py's task)."""
    rng = random.Random(seed)
    filler = ["the", "film", "movie", "is", "was", "it", "not"]
    answers = ["good", "great", "fun", "bad", "awful", "tedious", "gorgeous moving"]
    paragraphs = []
    for k in range(n):
        words = [rng.choice(filler) for _ in range(rng.randint(6, 16))]
        if rng.random() < 0.2:
            qa = {"id": f"q{k}", "question": "what was the film", "is_impossible": True, "answers": []}
        else:
            words.insert(rng.randint(0, len(words)), rng.choice(answers))
            text = next(a for a in answers if f" {a} " in f" {' '.join(words)} ")
            start = f" {' '.join(words)} ".index(f" {text} ")
            qa = {"id": f"q{k}", "question": "what was the film", "is_impossible": False,
                  "answers": [{"text": text, "answer_start": start}]}
        paragraphs.append({"context": " ".join(words), "qas": [qa]})
    return {"version": "v2.0", "data": [{"title": "films", "paragraphs": paragraphs}]}


def _bf16_of(run_folder: Path):
    return json.loads((run_folder / "run.json").read_text(encoding="utf-8"))["hyperparameters"].get("bf16")


def check_finetunes(tmp: Path, base: Path, n_examples: int = 200) -> dict:
    """A tagger and a reader fine-tuned from ``base`` through the public plan/run functions, each in its own
    try."""
    settings = Settings(models_dir=tmp / "models", allow_local_paths=True)
    fast = dict(epochs=6, learning_rate=5e-4, batch_size=16, warmup_ratio=0.1, patience=0)
    out: dict = {"hyperparameters": fast}
    try:
        conll = tmp / "tagged.conll"
        conll.write_text(_tagged_sentences(n_examples, seed=3), encoding="utf-8")
        t0 = time.perf_counter()
        plan = bv.plan_tagger(bv.read_tagged(conll), base=str(base), name="gpu-check-tagger", settings=settings,
                              **fast)
        (res,) = bv.run_tagger_plan(plan)
        out["tagger"] = {"seconds": round(time.perf_counter() - t0, 1), "train_seconds": round(res.seconds, 1),
                         "bf16": _bf16_of(res.path), "entity_f1": res.metrics.get("entity_f1"),
                         "token_accuracy": res.metrics.get("token_accuracy"), "learned": res.learned,
                         "verdict": res.verdict}
    except Exception as exc:  # noqa: BLE001 - recorded, the reader still runs
        traceback.print_exc()
        out["tagger"] = {"error": repr(exc)}
    try:
        squad = tmp / "squad.json"
        squad.write_text(json.dumps(_squad(n_examples, seed=1)), encoding="utf-8")
        t0 = time.perf_counter()
        plan = bv.plan_reader(bv.read_squad(squad), base=str(base), name="gpu-check-reader", settings=settings,
                              **fast)
        (res,) = bv.run_reader_plan(plan)
        out["reader"] = {"seconds": round(time.perf_counter() - t0, 1), "train_seconds": round(res.seconds, 1),
                         "bf16": _bf16_of(res.path), "exact": res.metrics.get("exact"), "f1": res.metrics.get("f1"),
                         "learned": res.learned, "verdict": res.verdict}
    except Exception as exc:  # noqa: BLE001 - recorded
        traceback.print_exc()
        out["reader"] = {"error": repr(exc)}
    return out


# ------------------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "gpu_check.json"))
    ap.add_argument("--n", type=int, default=512, help="texts for the throughput rows (below 512 also scales the "
                    "agreement and attribution samples down, for a dry run)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: a dry run without a GPU (every 'cuda' load on the CPU, fp32)")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU (--device cpu for a dry run)", file=sys.stderr)
        return 2
    scale = min(1.0, args.n / 512)
    size = lambda full, least: max(least, round(full * scale))  # noqa: E731
    started = time.perf_counter()
    out: dict = {"device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu (dry run)",
                 "torch": torch.__version__, "n": args.n}
    if args.device == "cpu":
        out["dry_run"] = "--device cpu: every cuda_* row ran on the CPU in fp32, so it compares the CPU with itself"
    tmp = Path(tempfile.mkdtemp())
    path = build_model(tmp / "minilm-shaped")

    section(out, None, check_classifier, path, args.device, args.n, size(64, 16), size(8, 2))
    section(out, "tagger", check_tagger, tmp, args.device, args.n, size(64, 16), size(6, 2))
    section(out, "reader", check_reader, tmp, args.device, args.n, size(32, 8), size(4, 2))
    section(out, "finetune", check_classifier_finetune, tmp, path, size(400, 96))
    section(out, "finetunes", check_finetunes, tmp, path, size(200, 64))
    out["total_seconds"] = round(time.perf_counter() - started, 1)

    text = json.dumps(out, indent=2, default=str)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
