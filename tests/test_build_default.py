"""End to end: the real build-default path on a reduced sample, then the model predicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_reduced_build_default_trains_saves_and_predicts(tmp_path):
    env = {**os.environ, "BERTVIZ_MODELS_DIR": str(tmp_path / "models"), "HF_HUB_OFFLINE": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "bertviz_app", "build-default", "--max-train-rows", "400", "--test-size", "200", "--epochs", "3", "--json"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=900,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    result = json.loads(build.stdout)
    assert "step" in build.stderr and "saved" in build.stderr  # progress was printed while building
    model_dir = tmp_path / "models" / "default"
    assert result["path"] == str(model_dir)
    assert (model_dir / "model.safetensors").is_file() and not list(model_dir.glob("*.bin"))
    card = (model_dir / "README.md").read_text()
    assert "400 training reviews" in card and "200 held-out" in card and "accuracy" in card
    # 400 reviews is far from the full build; it must still beat the majority class (0.58) and
    # predict both classes (a one-class model has macro-F1 <= 0.37 here).
    assert result["metrics"]["accuracy"] > 0.6 and result["metrics"]["macro_f1"] > 0.55, result
    config = json.loads((model_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}

    pred = subprocess.run(
        [sys.executable, "-m", "bertviz_app", "predict", "A gorgeous, moving film.", "--json"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )
    assert pred.returncode == 0, pred.stderr
    row = json.loads(pred.stdout)
    assert row["label"] in ("negative", "positive") and abs(sum(row["scores"].values()) - 1) < 1e-6
