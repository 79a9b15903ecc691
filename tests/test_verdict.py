"""The fine-tune verdict follows the numbers shown beside it (issue 35): its heading matches the
accuracy against the majority class and the probe, advice about epochs and the learning rate comes
only when the user set them, and "more epochs" never when early stopping ended the run."""

from __future__ import annotations

import pytest

from bertviz_app.train.finetune import judge

FAST = [0.45, 0.42, 0.40, 0.38, 0.40, 0.39]  # learned within the first logging interval (ln 2 = 0.693 at the start)
FALLING = [0.69, 0.60, 0.50, 0.40, 0.33, 0.30]
FLAT = [0.70, 0.69, 0.69, 0.68, 0.68, 0.68]  # stays at a uniform guess's loss
SET = {"epochs": 3.0, "learning_rate": 5e-5}  # what the user typed; blank ones are not passed
BLANK: dict = {}
BLANK_ADVICE, MORE_EPOCHS = "blank", "more epochs"

# accuracy, majority accuracy, probe (accuracy = macro-F1) or None, loss curve, mean top probability,
# stopped early?, settings given -> heading starts with, "leave them blank" advised?, "more epochs" advised?
CASES = {
    # the report: 90% against 50%, a probe one row ahead, fast learning, under-confident, early-stopped, blank
    "reported": (0.90, 0.50, 0.91, FAST, 0.62, True, BLANK, "Learned", False, False),
    "reported, settings given": (0.90, 0.50, 0.91, FAST, 0.62, True, SET, "Learned", False, False),
    "clean": (0.90, 0.50, 0.80, FALLING, 0.90, False, SET, "Learned", False, False),
    "behind the probe beyond noise": (0.80, 0.50, 0.95, FALLING, 0.85, True, SET, "Weak: below the probe", True, False),
    "behind the probe, blank": (0.80, 0.50, 0.95, FALLING, 0.85, False, BLANK, "Weak: below the probe", False, False),
    "barely, given, ran to the end": (0.64, 0.50, None, FLAT, 0.58, False, SET, "Weak: barely better", True, True),
    "barely, given, early-stopped": (0.64, 0.50, None, FLAT, 0.58, True, SET, "Weak: barely better", True, False),
    "barely, blank": (0.64, 0.50, None, FLAT, 0.58, False, BLANK, "Weak: barely better", False, False),
    "right but unsure, given": (0.85, 0.50, None, FLAT, 0.55, False, SET, "Weak: unsure", True, True),
    "unsure but loss fell": (0.85, 0.50, None, FALLING, 0.55, False, SET, "Learned", False, False),
    "chance, given, early-stopped": (0.52, 0.50, 0.53, FLAT, 0.52, True, SET, "Not learned", True, False),
    "chance, given, ran to the end": (0.52, 0.50, None, FLAT, 0.52, False, SET, "Not learned", True, True),
    "chance, blank": (0.52, 0.50, None, FLAT, 0.52, False, BLANK, "Not learned", False, False),
}


def _metrics(acc: float, conf: float, n: int = 100) -> dict:
    per = {c: {"precision": acc, "recall": acc, "f1": acc, "support": n // 2} for c in ("neg", "pos")}
    return {"accuracy": acc, "macro_f1": acc, "n": n, "per_class": per, "confusion_matrix": [[0, 0], [0, 0]],
            "mean_confidence": conf}


@pytest.mark.parametrize(("acc", "maj", "probe", "losses", "conf", "stopped", "hp", "head", "blank", "epochs"),
                         list(CASES.values()), ids=list(CASES))
def test_verdict_follows_the_numbers(acc, maj, probe, losses, conf, stopped, hp, head, blank, epochs):
    v = judge(_metrics(acc, conf), {"class": "neg", "accuracy": maj, "macro_f1": maj / 1.5}, mode="full",
              log_history=[{"loss": x, "step": 10 * i} for i, x in enumerate(losses, 1)],
              probe=None if probe is None else {"accuracy": probe, "macro_f1": probe},
              hyperparameters=hp, n_train=1000, stopped_early=stopped)
    assert v.heading.startswith(head), (v.heading, v.message)
    assert v.status == {"Learned": "learned", "Not learned": "not_learned"}.get(head, "weak")
    tips = " ".join(v.suggestions)
    assert (BLANK_ADVICE in tips) is blank, tips
    assert (MORE_EPOCHS in tips) is epochs, tips
    assert (v.status == "learned") is (not v.suggestions)  # a learned run needs no changes; the others say what
    assert f"{acc:.1%}" in v.message and f"{maj:.1%}" in v.message  # the numbers the heading is about


def test_the_page_shows_the_verdicts_heading():
    from bertviz_app.train.finetune import RunResult
    from bertviz_app.ui.finetune_view import verdict_md

    def shown(acc, probe):
        v = judge(_metrics(acc, 0.9), {"class": "neg", "accuracy": 0.5, "macro_f1": 0.33}, mode="full",
                  log_history=[{"loss": x} for x in FALLING], probe={"accuracy": probe, "macro_f1": probe})
        return verdict_md([RunResult(name="runs/x", path=".", mode="full", base="encoder", metrics={},
                                     misclassified=[], labels=("neg", "pos"), verdict=v)])

    assert shown(0.90, 0.91).startswith("**Learned.** runs/x (full)")
    assert shown(0.80, 0.95).startswith("**Weak: below the probe.** runs/x (full)")


@pytest.mark.parametrize("epochs", [1, None], ids=["epochs given", "epochs blank"])
def test_a_plans_verdict_advises_only_about_the_settings_the_user_gave(
    epochs, tiny_model_dir, tmp_path, settings
):
    from test_finetune import write_random_csv

    import bertviz_app as bv

    plan = bv.plan_finetune(write_random_csv(tmp_path / "noise.csv"), base=str(tiny_model_dir), mode="full",
                            epochs=epochs, batch_size=16, allow_paths=True, settings=settings)
    assert plan.given == (("epochs",) if epochs else ()) + ("batch_size",)
    (result,) = bv.run_plan(plan)
    v = result.verdict
    assert v.status == "not_learned" and v.suggestions  # random labels: it says what to change...
    assert any("You set epochs yourself" in s for s in v.suggestions) is bool(epochs)  # ...about epochs if given
    assert not any("learning rate" in s for s in v.suggestions)  # the learning rate was always automatic
