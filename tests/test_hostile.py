"""A corpus of hostile inputs against the served app (HTTP API) and the CLI: each gets the
message it must produce, and the server still answers afterwards."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("gradio")
from gradio_client import Client  # noqa: E402

from conftest import served_app  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def client(tiny_model_dir, tmp_path_factory):
    with served_app(
        str(tiny_model_dir),
        BERTVIZ_MODELS_DIR=tmp_path_factory.mktemp("registry"),
        BERTVIZ_ALLOW_LOCAL_PATHS="0",  # as on a public Space
        BERTVIZ_MAX_CHARS="20000",
        HF_HUB_OFFLINE="1",
    ) as url:
        yield Client(url, verbose=False)


def still_answers(client) -> None:
    out = client.predict("the film was good", api_name="/predict")
    assert abs(sum(out["scores"].values()) - 1) < 1e-5


TEXT_CASES = [
    ("", "empty"),
    ("   \n\t  ", "empty or whitespace"),
    ("x" * 100_000, r"100,000 characters; the limit is 20,000"),
    ("\x00\x00\x00", "empty or whitespace"),
]


@pytest.mark.parametrize("text, message", TEXT_CASES, ids=["empty", "whitespace", "100k", "only-nul"])
@pytest.mark.parametrize("endpoint", ["/predict", "/explain", "/attention"])
def test_bad_text_gets_a_message_and_the_server_survives(client, text, message, endpoint):
    with pytest.raises(Exception) as err:
        client.predict(text, api_name=endpoint)
    assert re.search(message, str(err.value)), str(err.value)
    assert "Traceback" not in str(err.value)
    still_answers(client)


@pytest.mark.parametrize(
    "text",
    [
        "good\x00 film\x07\x1b[31m",
        "فيلم جيد جدا good",
        "great film 😀🎬👍🏽",
        "a\u202egood\u202c film",
        "<script>alert(1)</script>",
    ],
    ids=["control-chars", "rtl", "emoji", "bidi-override", "script-tag"],
)
def test_odd_but_valid_text_is_analysed(client, text):
    out = client.predict(text, api_name="/predict")
    assert abs(sum(out["scores"].values()) - 1) < 1e-5
    exp = client.predict(text, api_name="/explain")
    assert len(exp["tokens"]) == len(exp["attributions"])


@pytest.mark.parametrize(
    "model, message",
    [
        ("no-such-model", "Unknown model 'no-such-model'"),
        ("../../etc", "turned off here"),
        ("/etc", "turned off here"),
        ("runs/../../../etc", "Unknown model|No registered model|points outside"),
        ("owner/na me$", "Unknown model"),
        ("google-bert/bert-base-uncased", "HF_HUB_OFFLINE.*local model"),
        ("a" * 400, "not valid"),
    ],
    ids=["unknown", "dotdot", "absolute", "runs-dotdot", "odd-hub-id", "hub-offline", "very-long"],
)
def test_bad_model_names(client, model, message):
    with pytest.raises(Exception) as err:
        client.predict("good film", "", model, api_name="/predict")
    assert re.search(message, str(err.value)), str(err.value)
    still_answers(client)


@pytest.mark.parametrize("n_steps", [0, 1, 10**9, -5])
def test_bad_n_steps(client, n_steps):
    with pytest.raises(Exception) as err:
        client.predict("good film", "", "pad", n_steps, api_name="/explain")
    assert "n_steps must be a whole number from 2 to 500" in str(err.value)
    still_answers(client)


def test_unknown_target_and_baseline(client):
    with pytest.raises(Exception, match="Unknown class 'neutral'"):
        client.predict("good film", "neutral", api_name="/explain")
    with pytest.raises(Exception, match="Unknown baseline"):
        client.predict("good film", "", "noise", api_name="/explain")
    still_answers(client)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["predict", "x" * 100_000], "100,000 characters"),
        (["explain", "good", "--n-steps", "1000000000"], "n_steps must be a whole number"),
        (["predict", "good", "--model", "../../etc"], "not a saved model|does not exist"),
        (["predict", "good", "--model", "bad id!"], "Unknown model"),
        (["finetune", "/no/such.csv"], "No file|not found|does not exist"),
    ],
    ids=["100k", "n-steps", "dotdot", "odd-id", "missing-csv"],
)
def test_cli_hostile_inputs(tiny_model_dir, argv, message, tmp_path):
    env_argv = [*argv, "--model", str(tiny_model_dir)] if "--model" not in argv and argv[0] != "finetune" else argv
    proc = subprocess.run([sys.executable, "-m", "bertviz_app", *env_argv], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path),
                               "PYTHONPATH": str(ROOT), "BERTVIZ_MODELS_DIR": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert re.search(message, proc.stderr), proc.stderr


def test_cli_non_numeric_hyperparameter_is_a_usage_error(tiny_model_dir, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bertviz_app", "finetune", "d.csv", "--epochs", "many"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "argument --epochs: invalid float value: 'many'" in proc.stderr


@pytest.mark.parametrize("stride, pool, message", [
    (-1, "mean", "stride .* must be a whole number from 0 to 32"),
    (10**9, "mean", "stride .* must be a whole number from 0 to 32"),
    ("abc", "mean", "stride .* must be a whole number"),
    (1.5, "mean", "stride .* must be a whole number"),
    (16, "median", "pool must be one of mean, max"),
    (16, None, "pool must be one of mean, max"),
])
def test_bad_sliding_window_options(client, stride, pool, message):
    import re

    with pytest.raises(Exception) as excinfo:
        client.predict("the film was good . " * 40, window=True, stride=stride, pool=pool, api_name="/predict")
    assert re.search(message, str(excinfo.value)), str(excinfo.value)
    still_answers(client)
