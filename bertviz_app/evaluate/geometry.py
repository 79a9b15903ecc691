"""[CLS] geometry by layer: where in the encoder a labelled set's classes become separable.

    vectors = layer_vectors(lm, texts)                 # [CLS] and mean vectors at every depth
    probes = probe_layers(vectors, labels)             # cross-validated linear probe per depth
    proj = project(vectors.at(3, "cls"), 2)            # PCA coordinates of one depth

``layer_vectors`` runs the model's own forward with ``output_hidden_states`` (``hidden_states[0]``
is the embeddings' output, ``hidden_states[l]`` the output of layer l, up to L) in length-sorted
batches and keeps, for every row and every requested depth:

- the **[CLS] vector**: position 0 (``[CLS]``, or ``<s>`` for RoBERTa-style tokenizers), what the
  classifier head reads at the last depth;
- the **mean vector**: the mean over the row's *word* tokens: padding (attention mask 0) and the
  tokenizer's special tokens ([CLS], [SEP], <s>, </s>) are excluded, so the mean says what the
  words carry, apart from the [CLS] vector beside it and from [SEP], whose vector is large and
  nearly the same in every text at the deeper layers. A row whose text yields no word token (only
  possible when truncation leaves none) averages all of its real tokens instead.

Both are stored as float16 numpy arrays (N, K, D) for N rows and K kept depths: memory is
N x K x D x 2 bytes each, so 2 x N x K x D x 2 bytes together (2,000 rows x 7 depths x 384: 21.5 MB;
20,000 rows x 13 depths x 768: 800 MB, which is when ``folder=`` keeps them on disk as
memory-mapped ``.npy`` files instead). The same forward's logits come along (float32), so a
caller that also wants predictions needs no second pass.

``probe_layers`` fits a scikit-learn logistic regression on standardised features (a Pipeline,
so the scaling is fitted on each training fold only) with seeded StratifiedKFold splits, the
same splits for every depth and both vectors: the accuracy says how linearly separable the classes
are at that depth. ``project`` is PCA (scikit-learn). Everything is deterministic for a seed.

Files are written with ``np.save(..., allow_pickle=False)`` and read with ``allow_pickle=False``:
nothing here ever unpickles. Nothing here reads the environment.
"""

from __future__ import annotations

import json
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..config import Settings
from ..errors import CancelledError, DataError, InputError
from ..models.encoding import check_text, pad_rows
from ..models.families import family_of
from ..models.registry import LoadedModel
from ..train.data import (
    ROW_NOTE,
    Table,
    build_dataset,
    choose_columns,
    format_rows,
    read_table,
    review_columns,
)
from ..train.data.messages import quote_list

__all__ = ["MAX_PROBE_ROWS", "VECTOR_KINDS", "LabelledRows", "LayerVectors", "Projection", "layer_vectors",
           "load_projections", "load_vectors", "probe_layers", "probe_rows", "project", "read_labelled",
           "save_projections"]

MAX_PROBE_ROWS = 5000  # past it the probes are fitted on a stratified sample of this many rows (probe_rows)
VECTOR_KINDS = ("cls", "mean")  # what each row has at every depth: the [CLS] vector, the mean of its word tokens
_FILE = re.compile(r"^[a-z]+_layer\d{2,3}\.npy$")  # the only file names an index may name


@dataclass(frozen=True, eq=False)
class LayerVectors:
    """Per-row vectors at the kept depths; fields run in parallel along the rows (N)."""

    layers: tuple[int, ...]  # the kept depths, ascending: indices into hidden_states (0 = embeddings, L = last)
    cls: np.ndarray  # (N, K, D) float16: position 0 at each kept depth
    mean: np.ndarray  # (N, K, D) float16: mean of the word tokens (no padding, no specials) at each kept depth
    logits: np.ndarray  # (N, C) float32: the same forward's output
    n_tokens: np.ndarray  # (N,) int32: tokens read, specials included
    truncated: np.ndarray  # (N,) bool: the text was cut at the model's max length
    labels: tuple[str, ...]  # the model's class names (columns of ``logits``)
    num_layers: int  # L: the model's encoder layers (hidden_states has L + 1 entries)

    def __len__(self) -> int:
        return int(self.cls.shape[0])

    @property
    def hidden_size(self) -> int:
        return int(self.cls.shape[2])

    @property
    def nbytes(self) -> int:
        """Bytes of the two vector arrays (N x K x D x 2 bytes each)."""
        return int(self.cls.nbytes + self.mean.nbytes)

    def position(self, layer: int) -> int:
        """Where depth ``layer`` is along the arrays' second axis; InputError if it was not kept."""
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or int(layer) not in self.layers:
            raise InputError(f"Layer {layer!r} was not kept; the kept layers are {', '.join(map(str, self.layers))}.")
        return self.layers.index(int(layer))

    def at(self, layer: int, kind: str = "cls") -> np.ndarray:
        """(N, D) float16: every row's ``kind`` ("cls" or "mean") vector at depth ``layer``."""
        if kind not in VECTOR_KINDS:
            raise InputError(f"kind must be one of {', '.join(VECTOR_KINDS)}, got {kind!r}.")
        return (self.cls if kind == "cls" else self.mean)[:, self.position(layer)]


@dataclass(frozen=True, eq=False)
class Projection:
    """PCA coordinates of N vectors: ``coords`` (N, k) float32 and the share of the variance each
    component explains (descending; their sum is at most 1)."""

    coords: np.ndarray  # (N, k) float32
    explained_variance_ratio: tuple[float, ...]  # (k,)


@dataclass(frozen=True)
class LabelledRows:
    """A labelled file read for the model: texts with their class index in ``lm.labels``."""

    texts: tuple[str, ...]
    labels: tuple[int, ...]  # index into ``label_names`` (the model's labels)
    label_names: tuple[str, ...]
    rows: tuple[int, ...]  # spreadsheet row of each text (header = row 1)
    columns: tuple[str, str]  # (text column, label column)
    notices: tuple[str, ...]  # what was guessed or skipped on the way in
    warnings: tuple[str, ...]  # the intake's warnings (empty texts, duplicates, long texts...)

    def class_counts(self) -> dict[str, int]:
        counts = np.bincount(np.asarray(self.labels, dtype=int), minlength=len(self.label_names))
        return {name: int(c) for name, c in zip(self.label_names, counts) if c}


# --------------------------------------------------------------------------- vectors
def _kept_layers(layers: Iterable[int] | None, num_layers: int) -> tuple[int, ...]:
    if layers is None:
        return tuple(range(num_layers + 1))
    if isinstance(layers, (int, np.integer)) and not isinstance(layers, bool):
        layers = [int(layers)]
    kept = []
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= int(layer) <= num_layers:
            raise InputError(f"Layers are numbered 0 (the embeddings) to {num_layers} (the last layer's output); "
                             f"got {layer!r}.")
        kept.append(int(layer))
    if not kept:
        raise InputError(f"Choose at least one layer (0 to {num_layers}).")
    return tuple(sorted(set(kept)))


def _open(folder: Path | None, name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    if folder is None:
        return np.zeros(shape, dtype=dtype)
    return np.lib.format.open_memmap(folder / name, mode="w+", dtype=dtype, shape=shape)


def layer_vectors(lm: LoadedModel, texts: Sequence[str], pairs: Sequence[str] | None = None, *,
                  layers: Iterable[int] | None = None, batch_size: int = 32,
                  progress: Callable[[int, int], None] | None = None, cancel: threading.Event | None = None,
                  folder: str | Path | None = None) -> LayerVectors:
    """The [CLS] vector and the mean of the word tokens' vectors of every text at every kept depth
    (``layers``: indices into ``hidden_states``, 0 = embeddings .. L = last layer; None: all L + 1).

    Texts (and second texts, for sentence pairs) are checked like predict's (empty, not a string,
    over ``lm.settings.max_chars``) but any number may be given; they are truncated at the model's
    max length. ``progress(done, total)`` is called after each batch; ``cancel`` set: stop after the
    current batch with CancelledError. ``folder``: write the vectors there as float16 ``cls.npy`` and
    ``mean.npy`` (memory-mapped while filled, so memory stays one batch's hidden states; read them
    back with ``load_vectors``) instead of keeping them in memory."""
    texts, pairs = _checked_inputs(texts, pairs, batch_size, lm.settings.max_chars)
    kept = _kept_layers(layers, lm.num_layers)
    out_dir = None
    if folder is not None:
        out_dir = Path(folder)
        if not out_dir.is_dir():
            raise InputError(f"Cannot write the vectors to {out_dir}: it is not a folder.")
    fam = family_of(lm.model)
    enc = lm.tokenizer(texts, pairs, truncation=True, max_length=lm.max_length, return_special_tokens_mask=True)
    lengths = np.array([len(ids) for ids in enc["input_ids"]])  # (N,)
    order = np.argsort(lengths, kind="stable")  # each batch pads to nearly its own length
    keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in enc]
    n = len(texts)
    cls = mean = None
    logits = np.zeros((n, len(lm.labels)), dtype=np.float32)  # (N, C)
    done = 0
    with lm.run_lock, torch.inference_mode():
        for start in range(0, n, batch_size):
            if cancel is not None and cancel.is_set():
                raise CancelledError(f"Stopped after {done:,} of {n:,} texts; nothing was kept.")
            idx = order[start:start + batch_size]
            cls_b, mean_b, logits_b = _batch_vectors(lm, fam, enc, keys, lengths, idx, kept)
            if cls is None:
                shape = (n, len(kept), int(cls_b.shape[2]))
                cls = _open(out_dir, "cls.npy", shape, np.float16)  # (N, K, D)
                mean = _open(out_dir, "mean.npy", shape, np.float16)  # (N, K, D)
            cls[idx] = cls_b.half().cpu().numpy()
            mean[idx] = mean_b.half().cpu().numpy()
            logits[idx] = logits_b
            done += len(idx)
            if progress is not None:
                progress(done, n)
    truncated = np.array([bool(e.overflowing) for e in enc.encodings], dtype=bool)  # (N,)
    result = LayerVectors(layers=kept, cls=cls, mean=mean, logits=logits, n_tokens=lengths.astype(np.int32),
                          truncated=truncated, labels=tuple(lm.labels), num_layers=lm.num_layers)
    if out_dir is not None:
        _finish_folder(out_dir, result)
    return result


def _checked_inputs(texts: Sequence[str], pairs: Sequence[str] | None, batch_size: int,
                    max_chars: int) -> tuple[list[str], list[str] | None]:
    """The texts and second texts checked like predict's, and ``batch_size`` a whole number of at least 1."""
    if isinstance(texts, str):
        texts = [texts]
    texts = [check_text(t, f"Text {i + 1}", max_chars) for i, t in enumerate(texts)]
    if not texts:
        raise InputError("No text given: give at least one text.")
    if pairs is not None:
        pairs = list(pairs)
        if len(pairs) != len(texts):
            raise InputError(f"{len(texts)} texts but {len(pairs)} second texts: give one per text.")
        pairs = [check_text(p, f"Second text {i + 1}", max_chars) for i, p in enumerate(pairs)]
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a whole number of at least 1, got {batch_size!r}.")
    return texts, pairs


def _batch_vectors(lm: LoadedModel, fam, enc, keys: list[str], lengths: np.ndarray, idx: np.ndarray,
                   kept: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """One forward pass over the rows ``idx``: their [CLS] vectors (B, K, D), their word tokens' mean
    vectors (B, K, D) at the ``kept`` depths, and their logits (B, C)."""
    batch = pad_rows(lm.tokenizer, enc, idx, keys, padding_side="right")  # [CLS] stays at position 0
    t = batch["input_ids"].shape[1]
    special = torch.tensor([enc["special_tokens_mask"][i] + [1] * (t - lengths[i]) for i in idx])  # (B, T)
    real = batch["attention_mask"].bool()  # (B, T)
    words = real & ~special.bool()  # (B, T)
    words = torch.where(words.any(dim=1, keepdim=True), words, real)  # no word token: all real ones
    weights = (words.float() / words.sum(dim=1, keepdim=True)).to(lm.device)  # (B, T), rows sum to 1
    inputs = {k: v.to(lm.device) for k, v in batch.items()}
    kw = fam.inputs(**inputs) if fam is not None else inputs
    out = lm.model(**kw, output_hidden_states=True)
    hs = out.hidden_states  # L + 1 tensors (B, T, D)
    cls_b = torch.stack([hs[layer][:, 0].float() for layer in kept], dim=1)  # (B, K, D)
    mean_b = torch.stack([torch.einsum("bt,btd->bd", weights, hs[layer].float()) for layer in kept],
                         dim=1)  # (B, K, D)
    return cls_b, mean_b, out.logits.float().cpu().numpy()


def _finish_folder(out_dir: Path, result: LayerVectors) -> None:
    """The memory-mapped vectors flushed, and the logits, lengths, truncation flags and index beside them."""
    result.cls.flush()
    result.mean.flush()
    for name, arr in (("logits.npy", result.logits), ("n_tokens.npy", result.n_tokens),
                      ("truncated.npy", result.truncated)):
        np.save(out_dir / name, arr, allow_pickle=False)
    (out_dir / "vectors.json").write_text(json.dumps(
        {"layers": list(result.layers), "labels": list(result.labels), "num_layers": result.num_layers,
         "rows": len(result.logits), "hidden_size": result.hidden_size, "dtype": "float16",
         "files": ["cls.npy", "mean.npy"]}), encoding="utf-8")


def _load_npy(path: Path, mmap: bool = False) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except FileNotFoundError:
        raise DataError(f"{path} is missing; write the folder again.") from None
    except (ValueError, OSError) as exc:  # a pickled object array, a damaged file
        raise DataError(f"{path} cannot be read as a plain numpy array ({exc}); write the folder again.") from None


def _read_index(path: Path) -> dict:
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path} is missing: this is not a folder written here.") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path} cannot be read ({exc}).") from None
    if not isinstance(index, dict):
        raise DataError(f"{path} is not an index written here.")
    return index


def load_vectors(folder: str | Path) -> LayerVectors:
    """The vectors ``layer_vectors(..., folder=folder)`` wrote (memory-mapped, read-only; never unpickled)."""
    folder = Path(folder)
    meta = _read_index(folder / "vectors.json")
    try:
        layers = tuple(int(x) for x in meta["layers"])
        labels = tuple(str(x) for x in meta["labels"])
        num_layers = int(meta["num_layers"])
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{folder / 'vectors.json'} is not an index written here.") from None
    cls, mean = _load_npy(folder / "cls.npy", mmap=True), _load_npy(folder / "mean.npy", mmap=True)
    if cls.shape != mean.shape or cls.ndim != 3 or cls.shape[1] != len(layers):
        raise DataError(f"The vectors in {folder} do not match their index; write the folder again.")
    return LayerVectors(layers=layers, cls=cls, mean=mean, logits=_load_npy(folder / "logits.npy"),
                        n_tokens=_load_npy(folder / "n_tokens.npy"), truncated=_load_npy(folder / "truncated.npy"),
                        labels=labels, num_layers=num_layers)


# --------------------------------------------------------------------------- probes
def _check_labels(labels, n: int) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != n:
        raise InputError(f"Give one label per row: {n:,} rows but labels of shape {tuple(y.shape)}.")
    return y


def probe_rows(y: np.ndarray, max_rows: int | None, folds: int, seed: int = 0) -> np.ndarray:
    """The rows a probe is fitted on: all of them up to ``max_rows`` (None: no cap), else a seeded
    stratified sample of about ``max_rows`` that keeps each class's share and at least ``folds`` rows
    (or all, if fewer) of every class. Sorted indices into ``y``."""
    n = len(y)
    if max_rows is None or n <= max_rows:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    keep = []
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        quota = min(len(rows), max(folds, int(round(len(rows) * max_rows / n))))
        keep.append(rng.choice(rows, size=quota, replace=False))
    return np.sort(np.concatenate(keep))


def probe_layers(vectors: LayerVectors, labels: Sequence, *, folds: int = 5, seed: int = 0,
                 max_iter: int = 1000, n_jobs: int | None = -1, max_rows: int | None = MAX_PROBE_ROWS) -> list[dict]:
    """Cross-validated accuracy of a linear probe at every kept depth, on the [CLS] vector and on
    the mean vector: ``[{"layer", "cls_probe_accuracy", "mean_probe_accuracy", "cls_std", "mean_std",
    "folds"}, ...]`` (accuracy: mean over folds; std: across folds; ``"not_converged": ["cls"...]``
    only where a fit stopped at ``max_iter``).

    The probe is StandardScaler -> LogisticRegression (L2, C=1, ``max_iter``) in a Pipeline (the
    scaling is fitted on each training fold alone), solved with liblinear (seeded): on 2,000
    reviews x 384 dimensions it reaches lbfgs's optimum (the same accuracies to 0.002) about 15x
    faster (lbfgs needs 100-180 iterations on these correlated features). Three or more classes:
    one-vs-rest, one such probe per class. The splits are StratifiedKFold(``folds``, shuffled with
    ``seed``), the same for every depth and both vectors. Fewer rows in the smallest class than
    ``folds``: as many folds as it has rows (at least 2). One class, or a class with one row,
    raises InputError. The fits run on ``n_jobs`` threads (liblinear releases the GIL; -1: one per
    core, 1: in this thread); the numbers do not depend on it. Past ``max_rows`` rows (default
    ``MAX_PROBE_ROWS``; None: no cap) the probes are fitted on a seeded stratified sample of that many
    (``probe_rows``; ``"rows"`` in each entry says how many): the fits grow faster than the rows
    (20,000 reviews: 151 s for all, 26 s for 5,000), and 5,000 rows pin an accuracy to about +-0.6
    points."""
    from joblib import Parallel, delayed
    from sklearn.base import clone
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    y = _check_labels(labels, len(vectors))
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InputError(f"folds must be a whole number of at least 2, got {folds!r}.")
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2:
        raise InputError(f"Every row has the same label ({classes[0]!r}, {len(y):,} rows): a probe needs at least "
                         "two classes. Add rows of another class.")
    if counts.min() < 2:
        rare = [str(c) for c, k in zip(classes, counts) if k < 2]
        raise InputError(f"Class{'es' if len(rare) > 1 else ''} {', '.join(map(repr, rare))} "
                         f"{'have' if len(rare) > 1 else 'has'} a single row: a cross-validated probe needs at least "
                         "2 rows of every class (5 for 5 folds). Add rows or drop that class.")
    k = int(min(folds, counts.min()))
    used = probe_rows(y, max_rows, k, seed)  # (M,) sorted
    splits = [(used[tr], used[te]) for tr, te in
              StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(used)), y[used])]
    linear = LogisticRegression(solver="liblinear", max_iter=max_iter, random_state=seed)
    probe = make_pipeline(StandardScaler(), linear if len(classes) == 2 else OneVsRestClassifier(linear))

    def fold(layer: int, kind: str, train: np.ndarray, test: np.ndarray) -> tuple[float, bool]:
        x = vectors.at(layer, kind)  # (N, D) float16; one depth in float32 at a time per thread
        model = clone(probe).fit(np.asarray(x[train], dtype=np.float32), y[train])
        fitted = model[-1]
        iters = max(int(np.max(e.n_iter_)) for e in getattr(fitted, "estimators_", [fitted]))
        return float(model.score(np.asarray(x[test], dtype=np.float32), y[test])), iters < max_iter

    tasks = [(layer, kind, tr, te) for layer in vectors.layers for kind in VECTOR_KINDS for tr, te in splits]
    with warnings.catch_warnings():  # convergence is read from n_iter_ instead
        warnings.simplefilter("ignore", ConvergenceWarning)
        done = Parallel(n_jobs=n_jobs, backend="threading")(delayed(fold)(*task) for task in tasks)
    results = iter(done)
    out = []
    for layer in vectors.layers:
        row: dict = {"layer": int(layer)}
        for kind in VECTOR_KINDS:
            scores, converged = zip(*(next(results) for _ in splits))
            row[f"{kind}_probe_accuracy"] = float(np.mean(scores))
            row[f"{kind}_std"] = float(np.std(scores))
            if not all(converged):
                row.setdefault("not_converged", []).append(kind)
        row["folds"], row["rows"] = k, int(len(used))
        out.append(row)
    return out


# --------------------------------------------------------------------------- projection
def project(vectors: np.ndarray, n_components: int = 2, *, seed: int = 0) -> Projection:
    """PCA of ``vectors`` (N, D) to ``n_components`` (2 or 3) dimensions. The components are nested:
    the first two columns of a 3-D projection are the 2-D projection."""
    from sklearn.decomposition import PCA

    if n_components not in (2, 3) or isinstance(n_components, bool):
        raise InputError(f"n_components must be 2 or 3, got {n_components!r}.")
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise InputError(f"Give one vector per row, (N, D); got shape {x.shape}.")
    if x.shape[0] < n_components or x.shape[1] < n_components:
        raise InputError(f"A {n_components}-D projection needs at least {n_components} rows and {n_components} "
                         f"dimensions; got {x.shape[0]} rows of {x.shape[1]}.")
    pca = PCA(n_components=n_components, svd_solver="full", random_state=seed)
    with np.errstate(invalid="ignore", divide="ignore"):  # identical rows ([CLS] at depth 0): no variance at all
        coords = pca.fit_transform(x).astype(np.float32)  # (N, k)
    ratio = np.nan_to_num(pca.explained_variance_ratio_, nan=0.0)  # all rows equal: 0/0
    return Projection(coords=coords, explained_variance_ratio=tuple(float(r) for r in ratio))


def save_projections(folder: str | Path, vectors: LayerVectors, *, n_components: int = 3) -> Path:
    """PCA of every kept depth and both vectors into ``folder``: one float32 ``.npy`` per depth and
    vector (``cls_layer03.npy``: (N, ``n_components``); its first two columns are the 2-D
    projection) and ``projections.json``, the index (rows, files, explained variance ratios).
    Returns the index's path."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"Cannot write the projections to {folder}: it is not a folder.")
    files = []
    for layer in vectors.layers:
        for kind in VECTOR_KINDS:
            p = project(vectors.at(layer, kind), n_components)
            name = f"{kind}_layer{layer:02d}.npy"
            np.save(folder / name, p.coords, allow_pickle=False)
            files.append({"layer": int(layer), "vector": kind, "file": name,
                          "explained_variance_ratio": list(p.explained_variance_ratio)})
    index = folder / "projections.json"
    index.write_text(json.dumps({"rows": len(vectors), "components": n_components,
                                 "note": "PCA per layer and vector; columns 0-1 are the 2-D projection",
                                 "files": files}, indent=1), encoding="utf-8")
    return index


def load_projections(folder: str | Path) -> dict[tuple[int, str], Projection]:
    """What ``save_projections`` wrote: {(layer, "cls" or "mean"): Projection}. Only the file names an
    index of this shape can hold are opened (no path leaves ``folder``); nothing is unpickled."""
    folder = Path(folder)
    index = _read_index(folder / "projections.json")
    out = {}
    for entry in index.get("files", []) if isinstance(index.get("files"), list) else []:
        try:
            name, layer, kind = str(entry["file"]), int(entry["layer"]), str(entry["vector"])
            ratio = tuple(float(r) for r in entry["explained_variance_ratio"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{folder / 'projections.json'} is not an index written here.") from None
        if not _FILE.fullmatch(name) or kind not in VECTOR_KINDS:
            raise DataError(f"{folder / 'projections.json'} names a file {name!r} that is not a projection; "
                            "write the folder again.")
        out[(layer, kind)] = Projection(coords=_load_npy(folder / name), explained_variance_ratio=ratio)
    return out


# --------------------------------------------------------------------------- a labelled file
def _class_index(found: Sequence[str], names: Sequence[str]) -> tuple[dict[str, int], str | None]:
    """File label -> index into the model's ``names``: the same name, else the same name up to case;
    when no label names a class and all are class numbers 0..C-1, those numbers (with a notice)."""
    exact = {n: i for i, n in enumerate(names)}
    folded = {n.casefold(): i for i, n in enumerate(names)}
    index = {f: exact[f] if f in exact else folded[f.casefold()] for f in found if f in exact or f.casefold() in folded}
    if not index and found and all(f.isdigit() and int(f) < len(names) for f in found):
        index = {f: int(f) for f in found}
        return index, "labels read as class numbers: " + ", ".join(f"{i} = {names[i]!r}" for i in sorted(
            set(index.values())))
    return index, None


def read_labelled(source, lm: LoadedModel, text_column: str | None = None, label_column: str | None = None, *,
                  settings: Settings | None = None) -> LabelledRows:
    """A labelled CSV/TSV/TXT (a path, bytes or a ``data.Table``) through the fine-tune intake
    (``read_table``, ``guess_columns``, ``review_columns``: a column of numbers is never the text,
    one class or a class of one row is refused), its labels mapped to ``lm.labels``. Labels the
    model does not have raise DataError listing them with their rows. ``settings``: the intake's
    limits (default ``lm.settings``)."""
    settings = settings if settings is not None else lm.settings
    table = source if isinstance(source, Table) else read_table(source, max_upload_mb=settings.max_upload_mb,
                                                               max_rows=settings.max_rows)
    notices = list(table.notices)
    text, label, guessed = choose_columns(table, text_column, label_column)
    if guessed:
        notices.append(guessed)
    report = review_columns(table, text, label, settings=settings)
    try:
        report.raise_if_blocking()
    except DataError as exc:
        raise DataError(str(exc).replace(":\n- ", ": ").replace("\n- ", "; ")) from None
    ds = build_dataset(table, text, label, settings=settings)
    index, note = _class_index(ds.label_names, lm.labels)
    unknown = [name for name in ds.label_names if name not in index]
    if unknown:
        where = {ds.label_names.index(u) for u in unknown}
        rows = sorted(r for r, y in zip(ds.source_rows, ds.labels) if y in where)
        raise DataError(f"The file has labels the model {lm.name!r} does not: {quote_list(unknown)} "
                        f"({format_rows(rows)}; {ROW_NOTE}). The model's labels: {quote_list(lm.labels)}. Rename "
                        "them in the file or choose the model trained on these labels.")
    if note:
        notices.append(note)
    labels = tuple(index[ds.label_names[y]] for y in ds.labels)
    return LabelledRows(texts=ds.texts, labels=labels, label_names=tuple(lm.labels), rows=ds.source_rows,
                        columns=(text, label), notices=tuple(notices),
                        warnings=tuple(p.message for p in report.warnings))
