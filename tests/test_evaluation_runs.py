"""The store of evaluations (issue 21, the page part): names, listing newest first, reopening by name
only (never a path), slices' rows, and public mode's rule that a visitor lists and reopens only their
own evaluations, within a cap."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
from datetime import datetime

import pytest

import bertviz_app as bv
from bertviz_app.evaluate import evaluation_runs as er

FILLER = ["the", "film", "movie", "was", "is", "a", "it", "not"]
WORDS = ["good", "bad", "great", "awful", "fun", "tedious"]
ALICE, BOB = "a" * 64, "b" * 64


def labelled_csv(n: int = 40, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["text", "label", "source"])
    for i in range(n):
        words = rng.choices(FILLER, k=rng.randint(1, 8)) + [rng.choice(WORDS)]
        rng.shuffle(words)
        w.writerow([" ".join(words), ("negative", "positive")[i % 2], rng.choice(["web", "shop"])])
    return buf.getvalue().encode()


@pytest.fixture(scope="module")
def ev(tiny):
    return bv.evaluate_file(tiny, labelled_csv(), name="reviews.csv", words=("not", "film"))


def test_names_are_strict_and_never_paths():
    name = er.new_name("runs/My_Run 2", datetime(2025, 1, 2, 3, 4, 5), token="0a1b2c3d4e")
    assert name == "eval-20250102-030405-runs-my-run-2-0a1b2c3d4e"
    assert er.is_evaluation_name(name) and er.check_name(f" {name} ") == name
    assert not er.is_evaluation_name(name + "\n")  # matched whole: a trailing newline is not let by
    assert er.model_slug("/tmp/models/tiny-bert/") == "tiny-bert" and er.model_slug("???") == "model"
    for bad in ("../x", "/etc/passwd", "eval-20250102-030405-a/../../b", "eval-2025-x", "eval-20250102-030405-",
                "eval-20250102-030405-A", "evaluations", "", None, 3, "eval-20250102-030405-" + "a" * 80):
        assert not er.is_evaluation_name(bad)
        with pytest.raises(bv.InputError, match="eval-20250101-120000-default"):
            er.check_name(bad)


def test_names_cannot_be_guessed_from_the_time_and_the_model():
    """Two evaluations of one model in the same second get names that differ in 40 random bits."""
    when = datetime(2025, 1, 2, 3, 4, 5)
    names = {er.new_name("default", when) for _ in range(50)}
    assert len(names) == 50
    for name in names:
        assert re.fullmatch(r"eval-20250102-030405-default-[0-9a-f]{10}", name) and er.is_evaluation_name(name)


def test_save_list_and_open(ev, models_dir):
    saved = er.save(ev, models_dir, now=datetime(2025, 1, 2, 3, 4, 5))
    again = er.save(ev, models_dir, now=datetime(2025, 1, 2, 3, 4, 5))  # the same second: a unique name
    assert saved.name.startswith("eval-20250102-030405-") and again.name.startswith("eval-20250102-030405-")
    assert again.name != saved.name
    for f in ("metrics.json", "predictions.csv", "reliability.json", "slices.json", "run.json"):
        assert (saved.folder / f).is_file()
    assert not list((models_dir / "evaluations").glob(".tmp-*"))  # written aside, renamed when whole
    listed = er.list_evaluations(models_dir)
    assert [e["name"] for e in listed] == [again.name, saved.name]  # newest first
    assert listed[0]["model"] == ev.model and listed[0]["source"] == "reviews.csv" and listed[0]["rows"] == 40
    assert listed[0]["accuracy"] == pytest.approx(ev.accuracy, abs=1e-12)
    assert er.open_evaluation(models_dir, saved.name) == saved.folder
    with pytest.raises(bv.ModelNotFoundError, match="No evaluation 'eval-20990101-000000-x'"):
        er.open_evaluation(models_dir, "eval-20990101-000000-x")
    with pytest.raises(bv.InputError, match="never a folder or a path"):
        er.open_evaluation(models_dir, "../evaluations/" + saved.name)
    # the registry lists no evaluation as a model
    assert not any("evaluation" in m["name"] for m in bv.list_models(models_dir))


def test_each_slice_lists_its_rows(ev, models_dir):
    members = er.slice_members(ev)
    assert len(members) == len(ev.slices)
    ok = dict(zip(ev.source_rows, (ev.true == ev.predicted).tolist()))
    for s, rows in zip(ev.slices, members):
        assert len(rows) == s.size, s.name
        assert sum(ok[r] for r in rows) == s.correct, s.name
    kinds = {s.kind for s in ev.slices}
    assert {"true label", "predicted label", "length", "word", "column"} <= kinds
    saved = er.save(ev, models_dir)
    stored = json.loads((saved.folder / "slices.json").read_text())
    assert [s["name"] for s in stored] == [s.name for s in ev.slices] and stored[0]["rows"] == members[0]


def test_a_visitor_sees_and_opens_only_their_own(ev, models_dir):
    a = er.save(ev, models_dir, owner=ALICE)
    b = er.save(ev, models_dir, owner=BOB)
    assert [e["name"] for e in er.list_evaluations(models_dir, ALICE)] == [a.name]
    assert [e["name"] for e in er.list_evaluations(models_dir, BOB)] == [b.name]
    assert {e["name"] for e in er.list_evaluations(models_dir)} == {a.name, b.name}  # local mode: shared
    with pytest.raises(bv.ModelNotFoundError) as theirs:
        er.open_evaluation(models_dir, b.name, ALICE)
    with pytest.raises(bv.ModelNotFoundError) as missing:
        er.open_evaluation(models_dir, "eval-20990101-000000-x", ALICE)
    # another visitor's evaluation answers as one that does not exist, and the answer names only Alice's
    assert str(theirs.value).replace(b.name, "X") == str(missing.value).replace("eval-20990101-000000-x", "X")
    assert b.name not in str(missing.value) and a.name in str(missing.value)
    with pytest.raises(bv.InputError, match="no owner token"):
        er.save(ev, models_dir, owner="nobody")
    assert er.delete_owner_evaluations(models_dir, ALICE) == [a.name]
    assert er.list_evaluations(models_dir, ALICE) == [] and er.list_evaluations(models_dir, BOB)


def test_a_visitor_keeps_at_most_the_cap_oldest_go_first(ev, models_dir):
    names = [er.save(ev, models_dir, owner=ALICE, keep_per_owner=2,
                     now=datetime(2025, 1, 1, 0, 0, k)) for k in range(3)]
    other = er.save(ev, models_dir, owner=BOB, keep_per_owner=2)
    assert names[2].removed == (names[0].name,) and names[1].removed == ()
    assert [e["name"] for e in er.list_evaluations(models_dir, ALICE)] == [names[2].name, names[1].name]
    assert er.list_evaluations(models_dir, BOB)[0]["name"] == other.name  # another visitor's are not counted


def test_sweep_removes_visitors_evaluations_not_opened_for_the_ttl(ev, models_dir):
    old = er.save(ev, models_dir, owner=ALICE)
    local = er.save(ev, models_dir)  # saved without an owner (local mode): kept
    week_ago = datetime.now().timestamp() - 7 * 24 * 3600
    os.utime(old.folder / "run.json", (week_ago, week_ago))
    assert er.sweep(models_dir, 24 * 3600) == [old.name]
    assert [e["name"] for e in er.list_evaluations(models_dir)] == [local.name]


def test_a_malformed_folder_is_not_listed(ev, models_dir):
    root = models_dir / "evaluations"
    (root / "eval-20250101-000000-half").mkdir(parents=True)  # no run.json, no metrics.json
    (root / "not-an-evaluation").mkdir()
    assert er.list_evaluations(models_dir) == []
    with pytest.raises(bv.ModelNotFoundError):
        er.open_evaluation(models_dir, "eval-20250101-000000-half")


def test_a_failed_write_leaves_nothing(ev, models_dir):
    def broken(ev, folder):
        (folder / "metrics.json").write_text("{}")
        raise bv.InputError("disk full")

    with pytest.raises(bv.InputError, match="disk full"):
        er.save(ev, models_dir, write=broken)
    assert list((models_dir / "evaluations").iterdir()) == []


def test_delete_my_data_takes_the_visitors_evaluations_too(ev, models_dir):
    from bertviz_app import service

    mine, theirs = er.save(ev, models_dir, owner=ALICE), er.save(ev, models_dir, owner=BOB)
    removed = service.delete_visitor_data(models_dir, ALICE)
    assert removed == [f"evaluations/{mine.name}"]
    assert not mine.folder.exists() and theirs.folder.is_dir()
    assert service.deleted_message(removed) == ("Deleted your data: 0 run(s), 1 evaluation(s) and your downloads. "
                                                "Files you uploaded were already deleted once read.")
    with pytest.raises(bv.InputError, match="no visitor"):
        service.delete_visitor_data(models_dir, None)
    assert theirs.folder.is_dir()


def test_a_models_folder_that_cannot_be_written_says_so(ev, tmp_path):
    blocked = tmp_path / "models"
    blocked.write_text("a file where the models folder should be")
    with pytest.raises(bv.InputError, match="must be writable"):
        er.save(ev, blocked)
