"""The CUDA paths, checked and timed against peers in the same run (needs a GPU; CI never runs it).

A random MiniLM-shaped classifier (6 layers, 384 wide, 12 heads; built from a config, no download)
with a small word-level vocabulary is loaded three ways: CPU fp32, CUDA fp32 and CUDA bf16 (the
product's default on a GPU). On the same texts it checks

- predictions: CUDA bf16/fp32 probabilities against CPU fp32 (max abs difference, argmax agreement);
- the forward wrapper (per-call kernel, [CLS]-only last layer) against ``model(**inputs)`` on CUDA;
- Integrated Gradients on CUDA: completeness (relative delta) and agreement with the CPU scores;
- the micro-batcher: 64 threads call ``predict_one`` at once and each gets its own text's answer;
- fine-tuning through the core service (``plan_finetune -> run_plan``) on the GPU with bf16;

and prints throughput ratios (texts/s) of CUDA bf16 and fp32 against CPU fp32, measured here.

    python bench/gpu_check.py [--out bench/out/gpu_check.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
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


def build_model(path: Path) -> Path:
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab=str(path / "vocab.txt"), do_lower_case=True, model_max_length=512)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536, max_position_embeddings=512, num_labels=2,
                        id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def texts(n: int, seed: int = 0) -> list[str]:
    words = [w for w in VOCAB if w.isalpha() and len(w) > 1]
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 300))) for _ in range(n)]


def rate(lm, items: list[str], repeats: int = 3) -> float:
    bv.predict(lm, items[:64])  # warm-up
    if lm.device.type == "cuda":
        torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        bv.predict(lm, items)
        if lm.device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return len(items) / best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "gpu_check.json"))
    ap.add_argument("--n", type=int, default=512, help="texts for the throughput rows")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: this check needs a GPU", file=sys.stderr)
        return 2
    out: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    tmp = Path(tempfile.mkdtemp())
    path = str(build_model(tmp / "minilm-shaped"))
    cpu = bv.load_model(path, device="cpu", settings=SETTINGS)
    g32 = bv.load_model(path, device="cuda", gpu_dtype="fp32", settings=SETTINGS)
    gbf = bv.load_model(path, device="cuda", settings=SETTINGS)
    out["default_cuda_dtype"] = str(next(gbf.predict_model().parameters()).dtype)

    sample = texts(64, seed=1)
    p_cpu = np.array([p.probs for p in bv.predict(cpu, sample)])
    for name, lm in (("cuda_fp32", g32), ("cuda_bf16", gbf)):
        p = np.array([q.probs for q in bv.predict(lm, sample)])
        out[f"{name}_max_abs_prob_diff_vs_cpu"] = float(np.abs(p - p_cpu).max())
        out[f"{name}_argmax_agreement_vs_cpu"] = float((p.argmax(1) == p_cpu.argmax(1)).mean())

    # forward wrapper vs the model's own forward on CUDA, padded batch, both kernels
    enc = g32.tokenizer(sample[:16], padding=True, truncation=True, max_length=512, return_tensors="pt").to("cuda")
    model = g32.predict_model()
    with torch.inference_mode():
        ref = model(**enc).logits
        for kernel in ("eager", "sdpa"):
            for cls_only in (False, True):
                got = classifier_logits(model, **enc, attention=kernel, cls_only=cls_only)
                out[f"wrapper_fp32_{kernel}_cls_only={cls_only}_max_abs_diff"] = float((got - ref).abs().max())

    # Integrated Gradients on CUDA vs CPU
    deltas, corr = [], []
    for text in sample[:8]:
        a_gpu = bv.attribute(g32, text, n_steps=64)
        a_cpu = bv.attribute(cpu, text, n_steps=64)
        deltas.append(a_gpu.relative_delta)
        corr.append(float(np.corrcoef(a_gpu.scores, a_cpu.scores)[0, 1]))
    out["ig_cuda_relative_delta_max"] = float(max(deltas))
    out["ig_cuda_vs_cpu_score_correlation_min"] = float(min(corr))

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
    items = texts(args.n, seed=3)
    r_cpu = rate(cpu, items[: max(64, args.n // 8)], repeats=1)
    r_32 = rate(g32, items)
    r_bf = rate(gbf, items)
    out["predict_texts_per_s"] = {"cpu_fp32": round(r_cpu, 1), "cuda_fp32": round(r_32, 1), "cuda_bf16": round(r_bf, 1)}
    out["ratio_cuda_bf16_vs_cpu_fp32"] = round(r_bf / r_cpu, 1)
    out["ratio_cuda_bf16_vs_cuda_fp32"] = round(r_bf / r_32, 2)

    # fine-tune through the core service on the GPU (bf16 when supported)
    rng = random.Random(4)
    rows = [{"text": " ".join(rng.choice(["good", "great", "fun"] if y else ["bad", "awful", "boring"])
                                for _ in range(12)), "label": "positive" if y else "negative"}
            for y in [i % 2 for i in range(400)]]
    import pandas as pd

    from bertviz_app.config import Settings

    csv = tmp / "train.csv"
    pd.DataFrame(rows).to_csv(csv, index=False)
    t0 = time.perf_counter()
    plan = bv.plan_finetune(str(csv), base=path, name="gpu-check", epochs=2,
                            settings=Settings(models_dir=tmp / "models"))
    res = bv.run_plan(plan)[-1]
    out["finetune"] = {"seconds": round(time.perf_counter() - t0, 1), "accuracy": res.metrics.get("accuracy"),
                       "bf16": res.hyperparameters.get("bf16"), "verdict": res.verdict.status if res.verdict else None,
                       "examples_per_second": res.examples_per_second}
    text = json.dumps(out, indent=2, default=str)
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
