"""[CLS] geometry by layer (issue 21): the vectors are the model's own hidden states (the [CLS]
position, and the mean of the word tokens with padding and specials left out, whatever else is in
the batch), the probes find a planted signal and are deterministic, PCA keeps its contract, and
files go to disk and back without pickle."""

from __future__ import annotations

import json
import random
import threading

import numpy as np
import pytest
import torch

import bertviz_app as bv
from bertviz_app import CancelledError, DataError, InputError
from bertviz_app.models.families import family_of

SHORT, LONG = "good", "the film was not good , it was a tedious , joyless slog and the movie was awful !"
FILLER = ["the", "film", "movie", "was", "is", "a", "it", "not", "fun", "bad", "great"]


def labelled(n: int = 60, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """Texts of filler words; label 1 exactly when the text contains "good" (half of them)."""
    rng = random.Random(seed)
    texts, labels = [], []
    for i in range(n):
        words = rng.choices(FILLER, k=rng.randint(2, 7))
        if i % 2:
            words.insert(rng.randint(0, len(words)), "good")
        texts.append(" ".join(words))
        labels.append(i % 2)
    return texts, np.array(labels)


def own_hidden_states(lm, text: str) -> tuple[torch.Tensor, ...]:
    """hidden_states of the model's own forward on ``text`` alone (no padding)."""
    enc = lm.tokenizer([text], return_tensors="pt")
    with torch.inference_mode():
        return lm.model(**family_of(lm.model).inputs(**enc), output_hidden_states=True).hidden_states


def word_mean(lm, text: str, layer: int) -> np.ndarray:
    enc = lm.tokenizer([text], return_special_tokens_mask=True)
    words = ~np.array(enc["special_tokens_mask"][0], dtype=bool)
    return own_hidden_states(lm, text)[layer][0].numpy()[words].mean(axis=0)


def close(a, b) -> bool:
    """float16 storage: about 3 significant digits."""
    return np.allclose(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32), rtol=2e-3, atol=2e-3)


# --------------------------------------------------------------------------- vectors
def test_every_depth_is_kept_as_float16(tiny):
    v = bv.layer_vectors(tiny, [SHORT, LONG, "a fun movie"])
    L, d = tiny.num_layers, tiny.model.config.hidden_size
    assert v.layers == tuple(range(L + 1)) and v.num_layers == L and len(v) == 3
    assert v.cls.shape == v.mean.shape == (3, L + 1, d) and v.cls.dtype == v.mean.dtype == np.float16
    assert v.nbytes == 2 * 3 * (L + 1) * d * 2  # rows x depths x D x 2 bytes, for each of the two vectors
    assert v.logits.shape == (3, 2) and v.labels == tiny.labels
    preds = bv.predict(tiny, [SHORT, LONG, "a fun movie"])
    assert [p.label for p in preds] == [tiny.labels[i] for i in v.logits.argmax(1)]
    only = bv.layer_vectors(tiny, [SHORT, LONG], layers=[2, 0])
    assert only.layers == (0, 2) and only.cls.shape == (2, 2, d)
    assert close(only.at(2), v.at(2)[:2]) and close(only.at(0, "mean"), v.at(0, "mean")[:2])


@pytest.mark.parametrize("layers", [[3], [-1], ["1"], [], [True]])
def test_layers_outside_the_model_are_refused(tiny, layers):
    with pytest.raises(InputError, match="Layers are numbered 0|at least one layer"):
        bv.layer_vectors(tiny, [SHORT], layers=layers)


def test_unkept_layer_and_bad_kind_are_refused(tiny):
    v = bv.layer_vectors(tiny, [SHORT], layers=[1])
    with pytest.raises(InputError, match="not kept"):
        v.at(0)
    with pytest.raises(InputError, match="kind must be"):
        v.at(1, "max")


@pytest.mark.parametrize("texts", [[], [""], ["ok", None], ["x" * 30_000]])
def test_bad_texts_are_refused(tiny, texts):
    with pytest.raises(InputError):
        bv.layer_vectors(tiny, texts)


def test_cls_vector_is_the_models_own_hidden_state(tiny):
    texts = [LONG, SHORT, "a great movie"]
    v = bv.layer_vectors(tiny, texts, batch_size=2)  # the long text pads the others in its batch
    for i, text in enumerate(texts):
        hs = own_hidden_states(tiny, text)
        assert len(hs) == tiny.num_layers + 1
        for layer in range(len(hs)):
            assert close(v.cls[i, layer], hs[layer][0, 0])
            assert close(v.mean[i, layer], word_mean(tiny, text, layer))


def test_mean_vector_ignores_padding_and_specials(tiny):
    """A short and a long text batched together give what each gives alone."""
    both = bv.layer_vectors(tiny, [SHORT, LONG], batch_size=2)
    alone = [bv.layer_vectors(tiny, [t]) for t in (SHORT, LONG)]
    for i in range(2):
        assert close(both.cls[i], alone[i].cls[0]) and close(both.mean[i], alone[i].mean[0])
    # the single word of SHORT is its mean: specials ([CLS], [SEP]) are left out
    hs = own_hidden_states(tiny, SHORT)
    assert close(both.mean[0, 1], hs[1][0, 1])
    assert both.n_tokens.tolist() == [3, len(tiny.tokenizer(LONG)["input_ids"])]


@pytest.mark.parametrize("family", ["distilbert", "roberta", "deberta-v2"])
def test_other_families(family, tmp_path_factory):
    from test_families import build_family_model

    lm = bv.load_model(str(build_family_model(family, tmp_path_factory.mktemp("geometry") / family)), device="cpu")
    texts = ["the film was awful , awful , awful", "fun", "a gorgeous , moving film !"]
    v = bv.layer_vectors(lm, texts, batch_size=3)
    assert v.cls.shape == (3, lm.num_layers + 1, lm.model.config.hidden_size)
    for i, text in enumerate(texts):
        hs = own_hidden_states(lm, text)
        for layer in range(len(hs)):
            assert close(v.cls[i, layer], hs[layer][0, 0])
            assert close(v.mean[i, layer], word_mean(lm, text, layer))
    pair = bv.layer_vectors(lm, ["the film"], ["was good"])
    assert pair.cls.shape == (1, lm.num_layers + 1, lm.model.config.hidden_size)


def test_progress_and_cancel(tiny):
    texts, _ = labelled(10)
    seen = []
    bv.layer_vectors(tiny, texts, batch_size=4, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(4, 10), (8, 10), (10, 10)]
    stop = threading.Event()
    stop.set()
    with pytest.raises(CancelledError, match="Stopped after 0 of 10"):
        bv.layer_vectors(tiny, texts, cancel=stop)


def test_vectors_on_disk_are_plain_float16_npy(tiny, tmp_path):
    texts, _ = labelled(9)
    mem = bv.layer_vectors(tiny, texts, batch_size=4)
    disk = bv.layer_vectors(tiny, texts, batch_size=4, folder=tmp_path)
    for name in ("cls.npy", "mean.npy"):
        arr = np.load(tmp_path / name, allow_pickle=False)
        assert arr.dtype == np.float16 and arr.shape == mem.cls.shape
    back = bv.load_vectors(tmp_path)
    assert back.layers == mem.layers and back.labels == mem.labels
    for a, b in ((back.cls, mem.cls), (back.mean, mem.mean), (disk.cls, mem.cls)):
        assert np.array_equal(np.asarray(a), b)
    assert np.array_equal(back.logits, mem.logits) and np.array_equal(back.n_tokens, mem.n_tokens)


def test_a_pickled_file_is_never_opened(tiny, tmp_path):
    bv.layer_vectors(tiny, [SHORT, LONG], folder=tmp_path)
    np.save(tmp_path / "cls.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="plain numpy array"):
        bv.load_vectors(tmp_path)


# --------------------------------------------------------------------------- probes
def test_probes_find_the_planted_word_and_are_deterministic(tiny):
    texts, y = labelled(60)
    v = bv.layer_vectors(tiny, texts)
    probes = bv.probe_layers(v, y)
    assert [p["layer"] for p in probes] == list(v.layers)
    for p in probes:
        assert {"layer", "cls_probe_accuracy", "mean_probe_accuracy", "cls_std", "mean_std", "folds",
                "rows"} <= set(p)
        assert p["folds"] == 5
        for k in ("cls_probe_accuracy", "mean_probe_accuracy"):
            assert 0.0 <= p[k] <= 1.0
    best = max(max(p["cls_probe_accuracy"], p["mean_probe_accuracy"]) for p in probes)
    assert best >= 0.8  # chance is 0.5: "good" or not is linearly readable at some depth
    assert bv.probe_layers(v, y) == probes  # seeded: the same numbers again
    assert bv.probe_layers(v, y, n_jobs=1) == probes  # on one thread or several
    shuffled = bv.probe_layers(v, np.random.default_rng(0).permutation(y))
    assert max(p["mean_probe_accuracy"] for p in shuffled) < best


def test_probe_rows_past_the_cap_are_a_stratified_seeded_sample():
    from bertviz_app.evaluate.geometry import probe_rows

    y = np.r_[np.zeros(900, dtype=int), np.ones(97, dtype=int), np.full(3, 2)]  # 1,000 rows, a rare class of 3
    assert np.array_equal(probe_rows(y, None, 5), np.arange(1000)) and len(probe_rows(y, 1000, 5)) == 1000
    used = probe_rows(y, 200, 5, seed=0)
    counts = np.bincount(y[used])
    assert counts[0] == 180 and counts[1] == 19  # each class keeps its share
    assert counts[2] == 3  # a class under `folds` rows keeps all it has
    assert np.all(np.diff(used) > 0) and np.array_equal(probe_rows(y, 200, 5, seed=0), used)
    assert not np.array_equal(probe_rows(y, 200, 5, seed=1), used)


def test_probes_past_max_rows_are_fitted_on_the_sample_and_say_so(tiny):
    texts, y = labelled(60)
    v = bv.layer_vectors(tiny, texts, layers=[0, 2])
    capped = bv.probe_layers(v, y, max_rows=30)
    assert [p["rows"] for p in capped] == [30, 30]
    assert [p["rows"] for p in bv.probe_layers(v, y)] == [60, 60]  # under the cap: every row
    assert capped != bv.probe_layers(v, y, max_rows=None)


def test_probe_labels_are_checked(tiny):
    texts, y = labelled(12)
    v = bv.layer_vectors(tiny, texts, layers=[0])
    with pytest.raises(InputError, match="same label"):
        bv.probe_layers(v, np.zeros(12, dtype=int))
    with pytest.raises(InputError, match="single row"):
        bv.probe_layers(v, np.r_[np.zeros(11, dtype=int), 1])
    with pytest.raises(InputError, match="one label per row"):
        bv.probe_layers(v, y[:5])
    with pytest.raises(InputError, match="folds"):
        bv.probe_layers(v, y, folds=1)
    few = np.r_[np.zeros(9, dtype=int), np.ones(3, dtype=int)]  # 3 rows of class 1: 3 folds, not 5
    assert bv.probe_layers(v, few)[0]["folds"] == 3
    assert bv.probe_layers(v, ["neg", "pos"] * 6)[0]["folds"] == 5  # class names work as labels too


def test_three_classes_probe_one_vs_rest(tiny):
    texts, y = labelled(30)
    y3 = np.where(y == 1, 1, np.where(np.arange(30) % 4 == 0, 2, 0))  # 3 classes
    v = bv.layer_vectors(tiny, texts, layers=[0, 2])
    probes = bv.probe_layers(v, y3, folds=3)
    assert len(probes) == 2 and all(0 <= p["mean_probe_accuracy"] <= 1 for p in probes)
    assert bv.probe_layers(v, y3, folds=3) == probes


# --------------------------------------------------------------------------- PCA
def test_projection_shape_and_variance(tiny):
    texts, _ = labelled(20)
    x = bv.layer_vectors(tiny, texts).at(2, "mean")
    p2, p3 = bv.project(x, 2), bv.project(x, 3)
    assert p2.coords.shape == (20, 2) and p3.coords.shape == (20, 3) and p2.coords.dtype == np.float32
    r = p3.explained_variance_ratio
    assert len(r) == 3 and list(r) == sorted(r, reverse=True) and 0 < sum(r) <= 1 + 1e-6
    assert np.allclose(p3.coords[:, :2], p2.coords, atol=1e-4)  # nested: 2-D = the first two columns of 3-D
    with pytest.raises(InputError, match="2 or 3"):
        bv.project(x, 4)
    with pytest.raises(InputError, match="at least 3 rows"):
        bv.project(x[:2], 3)


def test_projections_saved_and_loaded_without_pickle(tiny, tmp_path):
    texts, _ = labelled(12)
    v = bv.layer_vectors(tiny, texts)
    index = bv.save_projections(tmp_path, v)
    meta = json.loads(index.read_text(encoding="utf-8"))
    assert meta["rows"] == 12 and len(meta["files"]) == 2 * len(v.layers)
    for entry in meta["files"]:
        assert np.load(tmp_path / entry["file"], allow_pickle=False).shape == (12, 3)
    back = bv.load_projections(tmp_path)
    assert set(back) == {(layer, k) for layer in v.layers for k in ("cls", "mean")}
    meta["files"][0]["file"] = "../../etc/passwd"  # a crafted index opens nothing outside the folder
    index.write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(DataError, match="not a projection"):
        bv.load_projections(tmp_path)


# --------------------------------------------------------------------------- a labelled file
def write_csv(path, rows, header=("text", "label")):
    import csv

    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def test_read_labelled_maps_labels_to_the_model(tiny, tmp_path):
    texts, y = labelled(20)
    path = write_csv(tmp_path / "d.csv", [(t, tiny.labels[k]) for t, k in zip(texts, y)])
    data = bv.read_labelled(path, tiny)
    assert data.texts == tuple(texts) and data.labels == tuple(int(k) for k in y) and data.rows[0] == 2
    assert data.columns == ("text", "label") and data.class_counts() == {"negative": 10, "positive": 10}
    numbers = write_csv(tmp_path / "n.csv", [(t, int(k)) for t, k in zip(texts, y)])
    data = bv.read_labelled(numbers, tiny)
    assert data.labels == tuple(int(k) for k in y) and any("class numbers" in n for n in data.notices)


def test_read_labelled_lists_unknown_labels_with_rows(tiny, tmp_path):
    texts, y = labelled(20)
    rows = [(t, tiny.labels[k]) for t, k in zip(texts, y)]
    rows[3] = (rows[3][0], "neutral")
    rows[7] = (rows[7][0], "neutral")
    with pytest.raises(DataError, match=r"does not: 'neutral' \(rows 5 and 9"):
        bv.read_labelled(write_csv(tmp_path / "d.csv", rows), tiny)


def test_read_labelled_refuses_a_column_of_numbers_and_one_class(tiny, tmp_path):
    ids = write_csv(tmp_path / "ids.csv", [(i, "positive" if i % 2 else "negative") for i in range(20)],
                    header=("id", "label"))
    with pytest.raises(DataError, match="No column of 'ids.csv' holds text: found 'id' \\(numbers\\)"):
        bv.read_labelled(ids, tiny)
    one = write_csv(tmp_path / "one.csv", [(t, "positive") for t in labelled(8)[0]])
    with pytest.raises(DataError, match="same label"):
        bv.read_labelled(one, tiny)
