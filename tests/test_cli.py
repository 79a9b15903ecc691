"""The CLI's JSON contracts and its error behaviour (one line on stderr, exit status 2)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bertviz_app.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def cli_models(models_dir, monkeypatch):
    """The CLI is an edge: it reads BERTVIZ_MODELS_DIR from the environment (once, in main)."""
    monkeypatch.setenv("BERTVIZ_MODELS_DIR", str(models_dir))
    return models_dir


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_json_contract(capsys, tiny_model_dir):
    code, out, err = run(capsys, "predict", "good film", "bad film", "--model", str(tiny_model_dir), "--json")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in rows] == ["good film", "bad film"]
    for r in rows:
        assert set(r) == {"text", "label", "scores", "truncated"}
        assert set(r["scores"]) == {"negative", "positive"}
        assert sum(r["scores"].values()) == pytest.approx(1.0)
        assert r["label"] == max(r["scores"], key=r["scores"].get)


def test_predict_reads_stdin_lines(capsys, monkeypatch, tiny_model_dir):
    monkeypatch.setattr(sys, "stdin", io.StringIO("good film\n\nbad film\n"))
    code, out, _ = run(capsys, "predict", "--model", str(tiny_model_dir), "--json")
    assert code == 0 and len(out.splitlines()) == 2


def test_explain_json_contract(capsys, signal_model_dir, signal):
    """On the trained fixture (signal: the same folder, loaded once): the record against the
    independent reference (conftest.check_json_against_reference)."""
    from conftest import check_json_against_reference

    code, out, _ = run(capsys, "explain", "a good film", "--model", str(signal_model_dir("bert")), "--json",
                       "--n-steps", "20", "--baseline", "mask")
    assert code == 0
    r = json.loads(out)
    assert {"tokens", "attributions", "target", "delta", "n_steps", "baseline"} <= set(r)
    assert len(r["tokens"]) == len(r["attributions"]) and r["n_steps"] == 20 and r["baseline"] == "mask"
    check_json_against_reference(r, signal, "a good film", n_steps=20)


def test_explain_tolerance_guarantees_the_delta(capsys, tiny_model_dir, signal_model_dir, signal):
    from conftest import check_json_against_reference

    code, out, _ = run(capsys, "explain", "not a good film", "--model", str(signal_model_dir("bert")), "--json",
                       "--tolerance", "0.01")
    r = json.loads(out)
    assert code == 0 and r["relative_delta"] <= 0.01
    check_json_against_reference(r, signal, "not a good film", tolerance=0.01)
    code, _, err = run(capsys, "explain", "good", "--model", str(tiny_model_dir), "--tolerance", "2")
    assert code == 2 and "tolerance must be a relative delta" in err


def test_finetune_refuses_a_file_without_texts_naming_its_columns(capsys, tiny_model_dir, cli_models, tmp_path):
    """Issue 21: ``finetune`` on an ``id,label`` file guessed ``id`` as the text and trained on it. Now:
    exit 2, one line that names the columns found and says what to fix, no run saved, the file as it was."""
    data = tmp_path / "ids.csv"
    data.write_text("id,label\n" + "".join(f"{i},{('neg', 'pos')[i % 2]}\n" for i in range(40)), encoding="utf-8")
    before = data.read_bytes()
    code, out, err = run(capsys, "finetune", str(data), "--base", str(tiny_model_dir), "--mode", "probe")
    assert code == 2 and out == "" and "Traceback" not in err and err.count("\n") == 1
    assert "No column of 'ids.csv' holds text: found 'id' (numbers), 'label'" in err and "--text-column" in err
    code, out, err = run(capsys, "finetune", str(data), "--text-column", "id", "--base", str(tiny_model_dir),
                         "--mode", "probe", "--json")
    assert code == 2 and out == "" and "Traceback" not in err and err.count("\n") == 1
    assert "The text column 'id' holds numbers, not texts" in err and "'id' (numbers), 'label'" in err
    assert data.read_bytes() == before and not (cli_models / "runs").exists()


def test_attention_json_contract(capsys, tiny_model_dir):
    code, out, _ = run(capsys, "attention", "a good film", "--model", str(tiny_model_dir), "--json")
    r = json.loads(out)
    t = len(r["tokens"])
    assert code == 0 and len(r["weights"]) == 2 and len(r["weights"][0]) == 2
    assert all(len(row) == t for row in r["weights"][1][1]) and len(r["weights"][1][1]) == t


def test_summary_and_models(capsys, tiny_model_dir, cli_models):
    code, out, _ = run(capsys, "summary", "--model", str(tiny_model_dir), "--json")
    assert code == 0 and json.loads(out)["labels"] == ["negative", "positive"]
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0 and json.loads(out)[0] == {"name": "default", "path": str(cli_models / "default"), "built": False}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["predict", "   "], "Text is empty"),
        (["explain", "good", "--n-steps", "0"], "n_steps must be a whole number"),
        (["explain", "good", "--target", "meh"], "Unknown class 'meh'"),
        (["predict", "good", "--model", "runs/../../x"], "No registered model|Unknown model|points outside"),
        (["predict", "good", "--model", "nope"], "Unknown model 'nope'"),
    ],
)
def test_errors_are_one_line_and_exit_2(capsys, tiny_model_dir, models_dir, argv, message):
    if "--model" not in argv:
        argv = [*argv, "--model", str(tiny_model_dir)]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    import re

    assert re.search(message, err)


def test_console_entry_point_runs_without_traceback(tiny_model_dir):
    """The real process: python -m bertviz_app, an error, no traceback."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "bertviz_app", "predict", "", "--model", str(tiny_model_dir)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.strip().splitlines() == [
        "error: Text is empty or whitespace only: enter a sentence to analyse."
    ]


HEAVY_MODULES = ("torch", "transformers", "captum", "gradio")


@pytest.mark.parametrize("argv", [["--help"], ["predict", "--help"], ["models"], ["models", "--json"]])
def test_commands_that_need_no_model_never_import_torch(argv, tmp_path):
    """`models` and `--help` start in a fraction of a second: they must not import the ML stack."""
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "runs" / "r1" / "config.json").write_text("{}")
    probe = ("import sys\nfrom bertviz_app.cli import main\n"
             "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as e:\n    code = e.code\n"
             f"sys.stderr.write('LOADED [' + ','.join(m for m in {HEAVY_MODULES!r} if m in sys.modules) + ']\\n')\n"
             "sys.exit(code)\n")
    env = {**os.environ, "BERTVIZ_MODELS_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "LOADED []", proc.stderr
    if argv[0] == "models":
        assert "runs/r1" in proc.stdout  # it really listed the registry
    else:
        assert "usage:" in proc.stdout


def test_predict_window_reads_a_long_text_whole(capsys, tiny_model_dir):
    long = "the film was good . " * 40  # past the tiny model's 64 tokens
    code, out, _ = run(capsys, "predict", long, "--model", str(tiny_model_dir), "--json")
    assert code == 0 and json.loads(out)["truncated"] is True
    code, out, _ = run(capsys, "predict", long, "--model", str(tiny_model_dir), "--json", "--window", "--stride", "16")
    rec = json.loads(out)
    assert code == 0 and rec["truncated"] is False and rec["windows"] > 1
    code, _, err = run(capsys, "predict", long, "--model", str(tiny_model_dir), "--window", "--stride", "999")
    assert code == 2 and "stride" in err and err.count("\n") == 1


def _run_into_closed_pipe(argv, tmp_path, unbuffered):
    """Run ``python -m bertviz_app ARGV`` with stdout a real pipe whose reader left before the command
    wrote. Buffered (a shell's default), the write fails at the final flush; unbuffered
    (PYTHONUNBUFFERED=1), at the first print."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BERTVIZ_MODELS_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("BERTVIZ_DEBUG", None)
    env.pop("PYTHONUNBUFFERED", None)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    r, w = os.pipe()
    os.close(r)  # no reader at all: the first write meets EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "bertviz_app", *argv], stdout=w, stderr=subprocess.PIPE,
                              cwd=ROOT, env=env, timeout=120)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr.decode()


@pytest.mark.parametrize("argv, unbuffered", [(["models"], False), (["summary"], False), (["summary"], True),
                                              (["explain", "a good film", "--n-steps", "8"], False),
                                              (["attention", "a good film", "--json"], True)])
def test_a_closed_stdout_is_quiet_and_exits_0(argv, unbuffered, tiny_model_dir, tmp_path):
    """`bertviz-app summary | head -1`: the reader leaving is not an error (Python docs, "Note on SIGPIPE")."""
    if argv[0] != "models":
        argv = [*argv, "--model", str(tiny_model_dir)]
    code, err = _run_into_closed_pipe(argv, tmp_path, unbuffered)
    assert (code, err) == (0, "")


def test_predict_json_of_many_texts_into_head_1(tiny_model_dir, tmp_path):
    """Many more lines than the pipe holds (64 KiB), the reader gone after the first: quiet, status 0."""
    texts = tmp_path / "texts.txt"
    texts.write_text("the film was good\n" * 3000)
    with texts.open() as stdin:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        env.pop("BERTVIZ_DEBUG", None)
        env.pop("PYTHONUNBUFFERED", None)
        proc = subprocess.Popen([sys.executable, "-m", "bertviz_app", "predict", "--json", "--model",
                                 str(tiny_model_dir)], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=ROOT, env=env)
        first = proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
    assert json.loads(first)["text"] == "the film was good"
    assert (code, err) == (0, "")


def test_models_lists_every_name_the_registry_opens_by_name(capsys, models_dir, cli_models, tiny_model_dir):
    """`models` lists the bare encoder the page and --model accept; each listed model opens by its
    listed name, at its listed path (one table behind both, so they cannot drift apart)."""
    from bertviz_app.models.registry import model_folder
    from bertviz_app.train.default_model import encoder_path

    shutil.copytree(tiny_model_dir, models_dir / "runs" / "r1")
    code, out, _ = run(capsys, "models", "--json")
    listed = json.loads(out)
    assert code == 0 and [m["name"] for m in listed] == ["default", "runs/r1", "encoder"]
    assert listed[-1] == {"name": "encoder", "path": str(encoder_path()), "built": True}
    for m in listed:
        if m["built"]:
            assert model_folder(m["name"], models_dir=models_dir) == Path(m["path"])
    code, out, _ = run(capsys, "models")
    assert code == 0 and out.splitlines()[-1].split()[0] == "encoder" and str(encoder_path()) in out


def test_a_models_folder_named_encoder_is_listed_once_and_opened(capsys, models_dir, cli_models, tiny_model_dir):
    """models/encoder, where someone saved their own model, takes the name from the shipped encoder in
    the listing exactly as it does in resolution."""
    from bertviz_app import base_model_path
    from bertviz_app.models.registry import model_folder

    shutil.copytree(tiny_model_dir, models_dir / "encoder")
    code, out, _ = run(capsys, "models", "--json")
    listed = [m for m in json.loads(out) if m["name"] == "encoder"]
    assert code == 0 and listed == [{"name": "encoder", "path": str(models_dir / "encoder"), "built": True}]
    assert model_folder("encoder", models_dir=models_dir) == models_dir / "encoder"
    # the fine-tune's base resolves it the same way
    assert base_model_path("encoder", models_dir=models_dir) == models_dir / "encoder"


def test_build_default_takes_its_models_folder_as_an_option():
    """The background build starts its child with --models-dir (no environment variable is set for it)."""
    from bertviz_app.cli import build_parser

    args = build_parser().parse_args(["build-default", "--models-dir", "/srv/models", "--max-train-rows", "5"])
    assert args.models_dir == "/srv/models" and args.max_train_rows == 5
    assert build_parser().parse_args(["build-default"]).models_dir is None  # the settings' folder


def test_explain_compare_with_the_context_mixing_measures(capsys, tiny_model_dir):
    """`explain --compare --methods ig,value_zeroing,alti,norm,raw --json`: each method by its
    registered name with its faithfulness; the measures' JSON says completeness does not apply."""
    code, out, _ = run(capsys, "explain", "a good film", "--model", str(tiny_model_dir), "--compare", "--methods",
                       "ig,value_zeroing,alti,norm,raw", "--n-steps", "8", "--json")
    assert code == 0
    r = json.loads(out)
    assert list(r["methods"]) == ["integrated_gradients", "value_zeroing", "alti", "norm", "raw"]
    for name, m in r["methods"].items():
        f = m["faithfulness"]
        assert f["method"] == name and -1 <= f["comprehensiveness"] <= 1 and -1 <= f["sufficiency"] <= 1
        assert len(m["attributions"]) == len(r["tokens"])
        if name != "integrated_gradients":
            assert m["delta"] is None and m["completeness"].startswith("does not apply")
            assert min(m["attributions"]) >= 0 and sum(m["attributions"]) == pytest.approx(1.0, abs=1e-4)
    assert isinstance(r["methods"]["integrated_gradients"]["delta"], float)
    assert len(r["spearman"]) == 5 and r["most_faithful"] in r["methods"]
    code, out, _ = run(capsys, "explain", "a good film", "--model", str(tiny_model_dir), "--method", "value-zeroing")
    assert code == 0 and out.startswith("value_zeroing, target") and "completeness does not apply" in out


@pytest.mark.parametrize("argv", [["--compare", "--methods", "ig,attention_flow"], ["--method", "flow"]])
def test_an_unknown_method_lists_the_valid_ones(capsys, tiny_model_dir, argv):
    code, out, err = run(capsys, "explain", "a good film", "--model", str(tiny_model_dir), *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert all(m in err for m in ("integrated_gradients", "occlusion", "raw", "norm", "value_zeroing", "alti", "ig"))


def _labelled_csv(path: Path, rows: int = 30, label=lambda i: "positive" if i % 2 else "negative",
                  header=("review", "sentiment")) -> Path:
    import csv

    words = ["the film", "a movie", "it was", "not fun", "a great film", "the movie is"]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i in range(rows):
            w.writerow([f"{words[i % len(words)]} {'good' if i % 2 else 'bad'} {words[(i * 5) % len(words)]} x{i}",
                        label(i)])
    return path


def test_layers_json_contract(capsys, tiny_model_dir, tmp_path):
    """`layers FILE --json`: {"rows", "layers": [{"layer", "cls_probe_accuracy", "mean_probe_accuracy"}, ...]}
    (issue 21's --layers contract), one entry per depth 0 (embeddings) .. L; the columns are guessed."""
    data = _labelled_csv(tmp_path / "reviews.csv")
    code, out, err = run(capsys, "layers", str(data), "--model", str(tiny_model_dir), "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["rows"] == 30 and r["folds"] == 5 and r["classes"] == {"negative": 15, "positive": 15}
    assert [p["layer"] for p in r["layers"]] == [0, 1, 2]
    for p in r["layers"]:
        assert {"layer", "cls_probe_accuracy", "mean_probe_accuracy", "cls_std", "mean_std"} <= set(p)
        assert 0 <= p["cls_probe_accuracy"] <= 1 and 0 <= p["mean_probe_accuracy"] <= 1
    assert max(p["mean_probe_accuracy"] for p in r["layers"]) > 0.7  # "good" vs "bad" is readable
    assert "text column 'review', label column 'sentiment'" in err
    code, again, _ = run(capsys, "layers", str(data), "--model", str(tiny_model_dir), "--json")
    assert json.loads(again) == r  # seeded folds: the same numbers
    code, text, _ = run(capsys, "layers", str(data), "--model", str(tiny_model_dir), "--text-column", "review",
                        "--label-column", "sentiment")
    assert code == 0 and "layer  [CLS] probe" in text and "separates the classes best at layer" in text


def test_layers_out_writes_probes_projections_and_vectors_without_pickle(capsys, tiny_model_dir, tmp_path):
    import numpy as np

    data = _labelled_csv(tmp_path / "reviews.csv", rows=12)
    out_dir = tmp_path / "geometry"
    code, out, err = run(capsys, "layers", str(data), "--model", str(tiny_model_dir), "--json", "--out",
                         str(out_dir))
    assert code == 0, err
    assert json.loads((out_dir / "layers.json").read_text(encoding="utf-8")) == json.loads(out)
    index = json.loads((out_dir / "projections.json").read_text(encoding="utf-8"))
    assert index["rows"] == 12 and len(index["files"]) == 2 * 3
    for entry in index["files"]:
        assert np.load(out_dir / entry["file"], allow_pickle=False).shape == (12, 3)
        assert sum(entry["explained_variance_ratio"]) <= 1 + 1e-6
    cls = np.load(out_dir / "vectors" / "cls.npy", allow_pickle=False)
    assert cls.dtype == np.float16 and cls.shape == (12, 3, 16)


@pytest.mark.parametrize("label, header, message", [
    (lambda i: "positive" if i % 2 else "neutral", ("review", "sentiment"),
     "labels the model .* does not: 'neutral' \\(rows 2, 4, 6"),
    (lambda i: "positive", ("review", "sentiment"), "same label"),
    (lambda i: "positive" if i % 2 else "negative", ("id", "sentiment"), None),
])
def test_layers_bad_files_are_one_line_errors(capsys, tiny_model_dir, tmp_path, label, header, message):
    import re

    data = _labelled_csv(tmp_path / "d.csv", rows=12, label=label, header=header)
    if header[0] == "id":  # a file whose only candidate text column holds numbers
        data.write_text("id,sentiment\n" + "".join(f"{i},{label(i)}\n" for i in range(12)), encoding="utf-8")
        message = "No column of 'd.csv' holds text: found 'id' \\(numbers\\)"
    code, out, err = run(capsys, "layers", str(data), "--model", str(tiny_model_dir), "--json")
    assert code == 2 and out == "" and err.count("\n") == 1 and re.search(message, err), err
    assert "Traceback" not in err


def test_layers_refuses_a_zip_renamed_csv_before_loading_the_model(capsys, tmp_path):
    import zipfile

    data = tmp_path / "reviews.csv"
    with zipfile.ZipFile(data, "w") as z:
        z.writestr("reviews.csv", "text,label\ngood,positive\n")
    code, out, err = run(capsys, "layers", str(data), "--model", str(tmp_path / "no-such-model"), "--json")
    assert code == 2 and out == "" and err.count("\n") == 1 and "zip" in err.lower(), err


# --------------------------------------------------------------------------- evaluate --layers / --compare-with
def _labelled(path: Path, n: int = 40) -> Path:
    import random

    rng = random.Random(0)
    words = ["good", "bad", "great", "awful", "fun", "tedious", "film", "movie", "was", "not"]
    rows = [(" ".join(rng.choices(words, k=rng.randint(2, 8))), rng.choice(["negative", "positive"])) for _ in range(n)]
    lines = ["text,label"] + [f"{text},{label}" for text, label in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory) -> Path:
    from conftest import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("other") / "other-bert", seed=1)


def test_evaluate_layers_and_compare_json(capsys, tmp_path, tiny_model_dir, other_model_dir):
    data = _labelled(tmp_path / "e.csv")
    code, out, err = run(capsys, "evaluate", str(data), "--model", str(tiny_model_dir), "--layers",
                         "--compare-with", str(other_model_dir), "--json")
    assert code == 0, err
    r = json.loads(out)  # one object
    assert [p["layer"] for p in r["layers"]] == [0, 1, 2]
    assert {"cls_probe_accuracy", "mean_probe_accuracy"} <= set(r["layers"][0])
    c = r["comparison"]
    assert c["models"] == {"a": str(tiny_model_dir), "b": str(other_model_dir)}
    assert c["both_correct"] + c["only_a_correct"] + c["only_b_correct"] + c["both_wrong"] == r["rows"] == 40
    assert 0 < c["mcnemar_p"] <= 1 and c["reading"].endswith(".")
    assert len(c["disagreeing_rows"]) == c["disagreements"]
    code, out, _ = run(capsys, "evaluate", str(data), "--model", str(tiny_model_dir), "--json")
    assert code == 0 and "layers" not in json.loads(out) and "comparison" not in json.loads(out)


def test_evaluate_text_prints_the_probe_table_and_the_comparison(capsys, tmp_path, tiny_model_dir,
                                                                  other_model_dir):
    data = _labelled(tmp_path / "e.csv")
    code, out, err = run(capsys, "evaluate", str(data), "--model", str(tiny_model_dir), "--layers",
                         "--compare-with", str(other_model_dir))
    assert code == 0, err
    lines = out.splitlines()
    head = lines.index("layer  [CLS] probe  mean probe")
    assert [line.split()[0] for line in lines[head + 1:head + 4]] == ["0", "1", "2"]
    assert all(0 <= float(x) <= 1 for line in lines[head + 1:head + 4] for x in line.split()[1:])
    assert "only A right" in out and "largest slice differences" in out
    verdict = "(unlikely to be chance|no evidence either is better)"
    assert re.search(rf"^McNemar's exact test: .* p = [0-9.e-]+, {verdict}\.$", out, re.M)
    assert "--compare-with" not in out  # not a run: nothing to suggest


def test_evaluate_out_writes_layers_and_comparison(capsys, tmp_path, tiny_model_dir, other_model_dir):
    from bertviz_app import load_vectors, read_evaluation

    data = _labelled(tmp_path / "e.csv", 30)
    folder = tmp_path / "run"
    code, _, err = run(capsys, "evaluate", str(data), "--model", str(tiny_model_dir), "--layers",
                       "--compare-with", str(other_model_dir), "--out", str(folder), "--json")
    assert code == 0 and "comparison.json" in err and "layers.json" in err
    back = read_evaluation(folder)
    assert len(back["layers"]["layers"]) == 3 and back["comparison"]["rows"] == 30
    assert back["projections"][(0, "mean")].coords.shape == (30, 3)
    assert load_vectors(folder / "vectors").cls.shape[:2] == (30, 3)


def test_evaluate_suggests_the_base_of_a_run_and_refuses_other_classes(capsys, tmp_path, tiny_model_dir):
    from conftest import make_tiny_model

    data = _labelled(tmp_path / "e.csv", 20)
    run_dir = tmp_path / "my-run"
    shutil.copytree(tiny_model_dir, run_dir)
    (run_dir / "run.json").write_text(json.dumps({"name": "runs/my-run", "base": "encoder"}), encoding="utf-8")
    code, out, _ = run(capsys, "evaluate", str(data), "--model", str(run_dir))
    assert code == 0 and out.splitlines()[0] == (f"note: {run_dir} was fine-tuned from encoder; add --compare-with "
                                                 "encoder to see what the fine-tune changed")
    code, out, err = run(capsys, "evaluate", str(data), "--model", str(run_dir), "--json")
    assert code == 0 and "--compare-with encoder" in err and json.loads(out)["rows"] == 20
    three = make_tiny_model(tmp_path / "three", num_labels=3)
    code, out, err = run(capsys, "evaluate", str(data), "--model", str(tiny_model_dir), "--compare-with", str(three))
    assert code == 2 and out == "" and err.startswith("error: ") and "do not have the same classes" in err
    assert "class_0, class_1, class_2" in err and err.count("\n") == 1
    code, _, err = run(capsys, "evaluate", str(data), "--model", str(tiny_model_dir), "--compare-with",
                       str(tmp_path / "nowhere"))
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err
