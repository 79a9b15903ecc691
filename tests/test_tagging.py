"""Token classification end to end (issue 32): a ``*ForTokenClassification`` of each of the 7 families opens
through the registry with the token head, ``bv.tag`` labels its word-pieces, merges them into words and entities,
reads long texts in windows, and the CLI's ``tag`` and ``POST /v1/tag`` answer the same JSON.

The independent reference is transformers' own ``pipeline("token-classification")`` on the same tiny model (its
entities for aggregation simple/first/average/max) and the model's own forward (its probabilities). The tiny
taggers are each family's tiny model (``conftest.build_family_model``: its tokenizer and config) with a token
head: a seeded random classifier scaled so labels vary across tokens (``test_the_tiny_taggers_carry_signal``
checks it), and, for the windows, one trained for a few Adam steps to tag "joy" as a person and "slog" as a
place wherever they stand."""

from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pytest
import torch
import transformers as tf

import bertviz_app as bv
from bertviz_app import service
from bertviz_app.cli import main
from bertviz_app.config import Settings
from bertviz_app.errors import InputError, ModelNotFoundError
from bertviz_app.models import forward
from bertviz_app.models.families import family_of
from bertviz_app.models.heads import SEQUENCE_CLASSIFICATION, TOKEN_CLASSIFICATION, head_of
from bertviz_app.models.tagging import AGGREGATIONS, group_entities

from conftest import FAMILIES, WORDS, build_family_model

BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
IO = ["O", "PER", "LOC"]
# Space-separated words, each starting with a word of the tiny vocabularies (so its first piece is that word, never
# a lone "▁" or "Ġ" piece) and written with their characters only (no <unk> piece inside a word); several of more
# than one piece (joyless, filmgoer, slogs, funny). On such text the tokenizer's words are the pipeline's.
WORD_TEXTS = ("the film was awful the movie joyless", "gorgeous moving film it was fun", "a tedious slog is not joy",
              "the filmgoer was great the slogs is funny", "joy joy joy the the film")
# Punctuation next to words, words the vocabularies lack: the words differ from the pipeline's guess (see the
# module's docstring in tagging.py), the pieces never do: the "simple" strategy is compared on these too.
PUNCT_TEXTS = ("the film was awful, the ending joyless!", "gorgeous, moving film. it was glad fun!")
LETTERS = set("".join(WORDS)) | {" "}


def build_tagger(family: str, path, tags=BIO, seed: int = 0, scale: float = 0.5):
    """``family``'s tiny model (tokenizer, config) with a token head saved in ``path``: the classifier's weights
    are seeded normal x ``scale`` (the last hidden states are LayerNormed, so the logits spread over a few units
    and each label wins somewhere), its bias seeded normal x 0.5."""
    build_family_model(family, path)
    cfg = tf.AutoConfig.from_pretrained(path)
    cfg.num_labels, cfg.id2label, cfg.label2id = len(tags), dict(enumerate(tags)), {t: i for i, t in enumerate(tags)}
    torch.manual_seed(seed)
    model = tf.AutoModelForTokenClassification.from_config(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        model.classifier.weight.copy_(scale * torch.randn(model.classifier.weight.shape, generator=gen))
        model.classifier.bias.copy_(0.5 * torch.randn(len(tags), generator=gen))
    (path / "model.safetensors").unlink()
    model.save_pretrained(path, safe_serialization=True)
    return path


def entity_rows(n: int, seed: int = 0):
    """``n`` sentences of 3 to 40 filler words, most with "joy" (a person) or "slog" (a place) among them."""
    rng = random.Random(seed)
    filler = ["the", "film", "movie", "was", "is", "a", "it", "good", "bad", "fun"]
    rows = []
    for i in range(n):
        words = rng.choices(filler, k=rng.randint(3, 40))
        for _ in range(i % 3):
            words.insert(rng.randint(0, len(words)), rng.choice(["joy", "slog"]))
        rows.append(" ".join(words))
    return rows


def train_tagger(path, steps: int = 80):
    """The tagger in ``path`` trained to tag "joy" B-PER and "slog" B-LOC (the first piece of the word; the
    others I-), everything else O, and saved back. One thread, fixed seeds."""
    tok = tf.AutoTokenizer.from_pretrained(path)
    model = tf.AutoModelForTokenClassification.from_pretrained(path)
    texts = entity_rows(96)
    enc = tok(texts, padding=True, truncation=True, max_length=60, return_tensors="pt")
    labels = torch.full(enc["input_ids"].shape, -100)
    for r, text in enumerate(texts):
        words = text.split(" ")
        previous = None
        for i, w in enumerate(enc.word_ids(r)):
            if w is not None:
                kind = {"joy": "PER", "slog": "LOC"}.get(words[w])
                labels[r, i] = 0 if kind is None else BIO.index(("I-" if w == previous else "B-") + kind)
            previous = w
    inputs = {k: v for k, v in enc.items() if k in ("input_ids", "attention_mask")}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.train()
        for _ in range(steps):
            loss = model(**inputs, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture(scope="session")
def tagger_dir(tmp_path_factory):
    """``tagger_dir(family, kind)``: the folder of ``family``'s tiny tagger, kind "bio" (random head), "io" (IO
    tags) or "trained", built on first use and kept for the session."""
    built = {}

    def get(family: str, kind: str = "bio"):
        if (family, kind) not in built:
            path = tmp_path_factory.mktemp(f"tagger-{kind}") / family
            build_tagger(family, path, IO if kind == "io" else BIO)
            built[family, kind] = train_tagger(path) if kind == "trained" else path
        return built[family, kind]

    return get


@pytest.fixture(scope="module", params=FAMILIES)
def family(request):
    return request.param


def open_tagger(tagger_dir, family, kind="bio"):
    return bv.load_model(str(tagger_dir(family, kind)), device="cpu")


def pipeline_entities(lm, texts, aggregation):
    """transformers' token-classification pipeline's entities on the same model: (label, start, end, score), the
    span's leading whitespace trimmed (DeBERTa-v2's offsets count the space before a word; ours start after it)
    and the entities of no characters left out (a lone "Ġ" or "▁" piece before a word the vocabulary lacks
    has an empty span: the pipeline reports it as an entity of no text, ``tag`` does not)."""
    pipe = tf.pipeline("token-classification", model=lm.model, tokenizer=lm.tokenizer, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Tokenizer does not support real words, using fallback heuristic"
        answers = pipe(list(texts), aggregation_strategy=aggregation)
    out = []
    for text, ents in zip(texts, answers):
        rows = []
        for e in ents:
            start, end = int(e["start"]), int(e["end"])
            while start < end and text[start].isspace():
                start += 1
            if end > start:
                rows.append((e["entity_group"], start, end, float(e["score"])))
        out.append(rows)
    return out


def assert_same_entities(ours, theirs):
    assert [(e.label, e.start, e.end) for e in ours] == [r[:3] for r in theirs]
    np.testing.assert_allclose([e.score for e in ours], [r[3] for r in theirs], rtol=1e-5)


# --------------------------------------------------------------------------- the fixtures carry signal
def test_the_tiny_taggers_carry_signal(tagger_dir, family):
    """Labels vary across tokens and the winning probabilities span a range: a decode or a merge that got the
    columns or the pieces wrong would show."""
    lm = open_tagger(tagger_dir, family)
    results = bv.tag(lm, list(WORD_TEXTS))
    winners = {lab for r in results for lab in r.labels}
    top = np.concatenate([r.probs.max(axis=1) for r in results])
    assert len(winners) >= 2, winners
    assert top.min() < 0.6 and top.max() > 0.9, (top.min(), top.max())
    assert sum(len(r.entities) for r in results) >= 5


# --------------------------------------------------------------------------- per piece
def test_probabilities_sum_to_one_and_are_the_models_own_softmax(tagger_dir, family):
    """Each piece's probabilities are the softmax of ``model(...).logits`` at its position (the model's own
    forward, one text at a time: an independent reference), specials left out; rows sum to 1; a batch of texts
    of different lengths (padding) answers as each text alone."""
    lm = open_tagger(tagger_dir, family)
    batch = bv.tag(lm, list(WORD_TEXTS + PUNCT_TEXTS))
    for text, got in zip(WORD_TEXTS + PUNCT_TEXTS, batch):
        enc = lm.tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
        keep = ~enc.pop("special_tokens_mask")[0].bool()
        with torch.no_grad():
            own = torch.softmax(lm.model(**family_of(lm.model).inputs(**enc)).logits[0], -1)[keep].numpy()
        assert got.probs.shape == own.shape == (len(got.tokens), len(lm.labels))
        np.testing.assert_allclose(got.probs, own, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(got.probs.sum(axis=1), 1.0, rtol=1e-5)
        assert got.labels == tuple(lm.labels[k] for k in own.argmax(axis=1))
        assert got.tokens == tuple(t for t, k in zip(enc.tokens(), keep.tolist()) if k)
        assert got.truncated is False and got.windows == 1
        alone = bv.tag(lm, text)[0]
        np.testing.assert_allclose(alone.probs, got.probs, rtol=1e-4, atol=1e-6)


def test_a_repeated_token_keeps_every_piece_at_its_own_offsets(tagger_dir, family):
    """Peers keyed results by the token string and lost repeats: here every piece of "joy joy joy the the film"
    is kept, in order, each at its own characters."""
    lm = open_tagger(tagger_dir, family)
    text = "joy joy joy the the film"
    r = bv.tag(lm, text, aggregation="first")[0]
    pieces = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(r.tokens) == len(r.offsets) == len(r.labels) == len(pieces)
    assert [w.text for w in r.words] == text.split(" ")
    assert len({w.start for w in r.words}) == 6
    starts = [a for a, _ in r.offsets]
    assert starts == sorted(starts) and len(set(r.offsets)) == len(r.offsets)


# --------------------------------------------------------------------------- entities against the pipeline
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_entities_equal_the_pipelines(tagger_dir, family, aggregation):
    """The entities (label, start, end, score) equal transformers' pipeline's with the same aggregation strategy
    on the same model; every entity's text is ``text[start:end]``, with no whitespace at its ends."""
    assert all(set(t) <= LETTERS for t in WORD_TEXTS)  # the premise: no <unk> piece inside a word, and
    assert all(any(w.startswith(v) for v in WORDS if v.isalpha()) for t in WORD_TEXTS for w in t.split())  # no lone ▁
    lm = open_tagger(tagger_dir, family)
    texts = WORD_TEXTS + (PUNCT_TEXTS if aggregation == "simple" else ())
    ours = bv.tag(lm, list(texts), aggregation=aggregation)
    theirs = pipeline_entities(lm, texts, aggregation)
    for text, got, ref in zip(texts, ours, theirs):
        assert_same_entities(got.entities, ref)
        for e in got.entities:
            assert e.text == text[e.start : e.end] and e.text == e.text.strip() and e.text
            assert e.label in ("PER", "LOC")
    assert sum(len(r.entities) for r in ours) >= 5  # something was compared


def test_io_tags_make_an_entity_of_each_run_of_one_label(tagger_dir):
    """IO tags (no B-/I- prefix): each maximal run of one label is one entity, as the pipeline reads them."""
    for family in ("bert", "xlm-roberta"):
        lm = open_tagger(tagger_dir, family, "io")
        for aggregation in ("simple", "first"):
            ours = bv.tag(lm, list(WORD_TEXTS), aggregation=aggregation)
            for got, ref in zip(ours, pipeline_entities(lm, WORD_TEXTS, aggregation)):
                assert_same_entities(got.entities, ref)
            runs = 0
            for r in ours:
                units = r.labels if aggregation == "simple" else [w.label for w in r.words]
                runs += sum(1 for i, lab in enumerate(units) if lab != "O" and (i == 0 or units[i - 1] != lab))
            assert runs == sum(len(r.entities) for r in ours) > 0


def test_group_entities_reads_bio_and_io():
    """The grouping rule on hand-made units: B- starts an entity, I- of the same tag continues it, I- of another
    tag or after O starts one; O is no entity; IO labels continue runs of themselves."""
    text = "Ada Lovelace met Charles Babbage in London"
    words = [(0, 3), (4, 12), (13, 16), (17, 24), (25, 32), (33, 35), (36, 42)]

    def ents(labels):
        return [(e.text, e.label) for e in group_entities(text, [(lab, 0.5, a, b) for lab, (a, b) in
                                                                 zip(labels, words)])]

    assert ents(["B-PER", "I-PER", "O", "B-PER", "I-PER", "O", "B-LOC"]) == [
        ("Ada Lovelace", "PER"), ("Charles Babbage", "PER"), ("London", "LOC")]
    assert ents(["B-PER", "B-PER", "O", "I-PER", "I-LOC", "O", "I-LOC"]) == [
        ("Ada", "PER"), ("Lovelace", "PER"), ("Charles", "PER"), ("Babbage", "LOC"), ("London", "LOC")]
    assert ents(["PER", "PER", "O", "PER", "PER", "O", "LOC"]) == [
        ("Ada Lovelace", "PER"), ("Charles Babbage", "PER"), ("London", "LOC")]
    assert ents(["O"] * 7) == []


def test_words_are_the_tokenizers_own(tagger_dir):
    """Words come from the tokenizer (``word_ids``): RoBERTa's byte-level BPE splits "awful," into a word and a
    comma (the pipeline's heuristic glues them: the documented difference); a SentencePiece tokenizer keeps
    them one word, as the pipeline does."""
    text = "the film was awful, the ending joyless!"
    roberta = bv.tag(open_tagger(tagger_dir, "roberta"), text, aggregation="first")[0]
    assert [w.text for w in roberta.words] == ["the", "film", "was", "awful", ",", "the", "ending", "joyless", "!"]
    xlmr = bv.tag(open_tagger(tagger_dir, "xlm-roberta"), text, aggregation="first")[0]
    assert [w.text for w in xlmr.words] == text.split(" ")
    for r in (roberta, xlmr):
        for w in r.words:
            assert w.text == text[w.start : w.end]
            a, b = w.pieces
            k = int(r.probs[a].argmax())  # "first": the first piece's label and probability
            assert w.label == r.label_names[k] and w.score == pytest.approx(float(r.probs[a, k]), rel=1e-6)


def test_batches_padded_to_a_multiple_as_on_a_gpu_tag_as_exact_ones(tagger_dir, gpu_padding):
    """On a CUDA device batches pad to a multiple of tokens: the padding is masked and cut off, so every piece's
    probabilities, the words and the entities are those of exact padding, a text read in windows too."""
    lm = open_tagger(tagger_dir, "bert", "trained")
    texts = ["it was joy", " ".join(["the film was good it is a movie joy"] * 12), *WORD_TEXTS]
    exact_widths = gpu_padding(1)
    exact = bv.tag(lm, texts, stride=8, batch_size=2)
    padded_widths = gpu_padding(16)
    padded = bv.tag(lm, texts, stride=8, batch_size=2)
    assert exact[1].windows > 1 and any(t.entities for t in exact)
    assert all(w % 16 == 0 or w == lm.max_length for w in padded_widths)  # the positive control: padding happened
    assert sum(padded_widths) > sum(exact_widths) and len(padded_widths) == len(exact_widths) > 1
    for a, b in zip(exact, padded):
        assert a.probs.shape == b.probs.shape and a.labels == b.labels
        assert [(w.text, w.label, w.pieces) for w in a.words] == [(w.text, w.label, w.pieces) for w in b.words]
        assert [(e.text, e.label, e.start, e.end) for e in a.entities] == \
            [(e.text, e.label, e.start, e.end) for e in b.entities]
        np.testing.assert_allclose(b.probs, a.probs, rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------- long texts
def test_windows_find_an_entity_past_the_first_window(tagger_dir, family):
    """A text three windows long with "joy" near its end and "slog" in its middle: read in windows, both are found
    at their characters; cut at the model's length (window=False) neither is, and truncated says so. Positive
    control: the trained tagger finds "joy" in a short text."""
    lm = open_tagger(tagger_dir, family, "trained")
    short = bv.tag(lm, "it was joy")[0]
    assert [(e.text, e.label) for e in short.entities] == [("joy", "PER")]
    words = " ".join(["the film was good it is a movie"] * 16).split(" ")
    words.insert(50, "slog")
    words.insert(len(words) - 3, "joy")
    text = " ".join(words)
    joy, slog = text.rindex(" joy ") + 1, text.index(" slog ") + 1
    whole = bv.tag(lm, text, stride=8)[0]
    assert whole.windows >= 3 and whole.truncated is False
    first_window = lm.tokenizer(text, truncation=True, max_length=lm.max_length, return_offsets_mapping=True)
    assert joy > first_window["offset_mapping"][-2][1]  # "joy" lies past what one window reads
    assert len(whole.tokens) == len(lm.tokenizer(text, add_special_tokens=False)["input_ids"]) > lm.max_length
    found = {(e.text, e.label, e.start, e.end) for e in whole.entities}
    assert ("joy", "PER", joy, joy + 3) in found and ("slog", "LOC", slog, slog + 4) in found
    cut = bv.tag(lm, text, window=False)[0]
    assert cut.truncated is True and cut.windows == 1 and len(cut.tokens) < len(whole.tokens)
    assert not any(e.label == "PER" and e.start == joy for e in cut.entities)
    assert cut.offsets == whole.offsets[: len(cut.offsets)]


def test_each_piece_is_read_in_the_window_where_it_is_most_central(tagger_dir):
    """The probabilities of every piece of a long text equal the model's own forward on the window where it has
    the most context on both sides (computed here from the tokenizer's overflow windows)."""
    lm = open_tagger(tagger_dir, "bert")
    text = " ".join(entity_rows(6, seed=3))
    stride = 10
    got = bv.tag(lm, text, stride=stride)[0]
    enc = lm.tokenizer(text, truncation=True, max_length=lm.max_length, stride=stride,
                       return_overflowing_tokens=True, return_offsets_mapping=True)
    assert len(enc["input_ids"]) >= 3
    best: dict[tuple[int, int], tuple[int, np.ndarray]] = {}
    for w in range(len(enc["input_ids"])):
        ids = torch.tensor([enc["input_ids"][w]])
        with torch.no_grad():
            p = torch.softmax(lm.model(input_ids=ids).logits[0], -1).numpy()
        at = [i for i, s in enumerate(enc.encodings[w].sequence_ids) if s == 0]
        for j, i in enumerate(at):
            key, central = tuple(enc.encodings[w].offsets[i]), min(j, len(at) - 1 - j)
            if key not in best or central > best[key][0]:
                best[key] = (central, p[i])
    assert list(best) == list(got.offsets)
    np.testing.assert_allclose(got.probs, np.stack([v[1] for v in best.values()]), rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------- the head seam
def test_a_token_checkpoint_opens_with_the_token_head(tagger_dir, family, signal_model_dir):
    """The registry opens it as its own class (no fresh-head warning), the composed forward gives the model's own
    (B, T, C) logits with padding, and the summary's rows add up with the token classifier's counted."""
    lm = open_tagger(tagger_dir, family)
    assert lm.head is TOKEN_CLASSIFICATION and head_of(lm.model) is TOKEN_CLASSIFICATION
    assert type(lm.model).__name__.endswith("ForTokenClassification") and not lm.warnings
    assert lm.labels == tuple(BIO)
    enc = lm.tokenizer(list(WORD_TEXTS[:2]), return_tensors="pt", padding=True)
    with torch.no_grad():
        own = lm.model(**family_of(lm.model).inputs(**enc)).logits.numpy()  # (B, T, C)
        seam = forward.classifier_logits(lm.model, **enc, cls_only=True).numpy()
    mask = enc["attention_mask"].numpy().astype(bool)
    assert seam.shape == own.shape
    np.testing.assert_allclose(seam[mask], own[mask], rtol=1e-4, atol=1e-5 * np.abs(own).max())
    assert TOKEN_CLASSIFICATION.composable(family_of(lm.model), lm.model)
    s = bv.summary(lm)
    assert sum(n for _, n in s.components) == s.total_params == sum(p.numel() for p in lm.model.parameters())
    head = lm.model.classifier.weight.numel() + len(BIO)  # (C, D) weights and C biases
    assert dict(s.components)["token classifier"] == s.classifier_params == head
    assert s.head == "token classification" == s.to_dict()["head"]  # the summary names the head it counts
    assert bv.summary(bv.load_model(str(signal_model_dir(family)), device="cpu")).head == "sequence classification"


def test_a_tagger_and_a_classifier_are_each_refused_by_the_others_doors(tagger_dir, signal_model_dir):
    """A tagger given to predict/explain/compare, a classifier given to tag: an InputError naming the head the
    model has and where to use it. Positive controls: each works at its own door."""
    tagger = open_tagger(tagger_dir, "bert")
    classifier = bv.load_model(str(signal_model_dir("bert")), device="cpu")
    for call in (lambda: bv.predict(tagger, "the film"), lambda: bv.predict(tagger, "the film", window=True),
                 lambda: bv.attribute(tagger, "the film", n_steps=4), lambda: service.explain(tagger, "the film"),
                 lambda: service.predict(tagger, "the film"), lambda: service.compare(tagger, "the film")):
        with pytest.raises(InputError, match="is a token classification model .*Use tag"):
            call()
    with pytest.raises(InputError, match=r"is a sequence classification model .*BertForSequenceClassification.*"
                                         r"needs a token classification model .*Use predict"):
        bv.tag(classifier, "the film")
    assert bv.predict(classifier, "the film")[0].label in classifier.labels
    assert bv.tag(tagger, "the film")[0].tokens == ("the", "film")
    assert SEQUENCE_CLASSIFICATION.doors and TOKEN_CLASSIFICATION.doors


def test_bad_options_and_text_each_get_one_clear_message(tagger_dir):
    lm = open_tagger(tagger_dir, "bert")
    for kwargs, message in (({"aggregation": "mean"}, "aggregation must be one of simple, first, average, max"),
                            ({"stride": 60}, "stride"), ({"batch_size": 0}, "batch_size"),
                            ({"attention": "flash"}, "attention must be one of")):
        with pytest.raises(InputError, match=message):
            bv.tag(lm, "the film", **kwargs)
    for text in ("", "   ", []):
        with pytest.raises(InputError, match="empty|No text"):
            bv.tag(lm, text)


# --------------------------------------------------------------------------- the CLI
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_tag_json_and_lines(capsys, tagger_dir):
    folder = str(tagger_dir("electra"))
    lm = bv.load_model(folder, device="cpu")
    code, out, _ = run(capsys, "tag", *WORD_TEXTS[:2], "--model", folder, "--json", "--aggregation", "average")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    expected = [t.to_dict() for t in bv.tag(lm, list(WORD_TEXTS[:2]), aggregation="average")]
    assert len(rows) == 2 and all(set(r) == {"text", "entities", "tokens", "labels", "truncated"} for r in rows)
    for r, e in zip(rows, expected):
        assert r["tokens"] == e["tokens"] and r["labels"] == e["labels"] and r["truncated"] is False
        assert [{k: v for k, v in x.items() if k != "score"} for x in r["entities"]] == [
            {k: v for k, v in x.items() if k != "score"} for x in e["entities"]]
        assert all(set(x) == {"text", "label", "start", "end", "score"} for x in r["entities"])
        np.testing.assert_allclose([x["score"] for x in r["entities"]], [x["score"] for x in e["entities"]],
                                   rtol=1e-6)
        assert all(r["text"][x["start"] : x["end"]] == x["text"] for x in r["entities"])
    code, out, _ = run(capsys, "tag", WORD_TEXTS[0], "--model", folder)
    lines = out.splitlines()
    first = bv.tag(lm, WORD_TEXTS[0])[0]
    assert code == 0 and len(lines) == len(first.entities) > 0
    assert all(line.split()[0] == e.label and line.endswith(e.text) for line, e in zip(lines, first.entities))


def test_cli_tag_refusals_are_one_line(capsys, tagger_dir, signal_model_dir):
    folder = str(tagger_dir("bert"))
    for argv, message in ((["tag", "", "--model", folder], "empty"),
                          (["tag", "the film", "--model", str(signal_model_dir("bert"))],
                           "is a sequence classification model"),
                          (["tag", "the film", "--model", "./no-such-tagger"], "does not exist"),
                          (["predict", "the film", "--model", folder], "is a token classification model")):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "" and err.startswith("error: ") and message in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, _ = run(capsys, "tag", "the film", "--model", folder)  # positive control
    assert code == 0


def test_cli_aggregation_names_are_the_cores():
    from bertviz_app.cli.tagging import AGGREGATION_NAMES

    assert AGGREGATION_NAMES == AGGREGATIONS


# --------------------------------------------------------------------------- the JSON API
def test_v1_tag_answers_the_libraries_json_and_refuses_bad_input_clearly(tmp_path, tagger_dir, signal_model_dir):
    from fastapi.testclient import TestClient

    from bertviz_app.serve.server import create_app

    folder = str(tagger_dir("deberta-v2"))
    lm = bv.load_model(folder, device="cpu")
    with TestClient(create_app(Settings(models_dir=tmp_path), folder, page=False)) as client:
        r = client.post("/v1/tag", json={"text": WORD_TEXTS[2], "aggregation": "max"})
        assert r.status_code == 200, r.text
        got, want = r.json(), bv.tag(lm, WORD_TEXTS[2], aggregation="max")[0].to_dict()
        assert {k: v for k, v in got.items() if k != "entities"} == {k: v for k, v in want.items() if k != "entities"}
        assert [(e["text"], e["label"], e["start"], e["end"]) for e in got["entities"]] == [
            (e["text"], e["label"], e["start"], e["end"]) for e in want["entities"]] and got["entities"]
        np.testing.assert_allclose([e["score"] for e in got["entities"]], [e["score"] for e in want["entities"]],
                                   rtol=1e-6)
        long = client.post("/v1/tag", json={"text": " ".join(["the film was good"] * 40), "window": False})
        assert long.status_code == 200 and long.json()["truncated"] is True
        for body, status, message in (({"text": ""}, 400, "empty"),
                                      ({"text": "the film", "model": str(signal_model_dir("bert"))}, 400,
                                       "is a sequence classification model"),
                                      ({"text": "the film", "model": "nobody/no-such-model-here"}, 404, ""),
                                      ({"text": "the film", "aggregation": "mean"}, 400, "aggregation must be"),
                                      ({"text": "the film", "bogus": 1}, 422, "bogus")):
            r = client.post("/v1/tag", json=body)
            assert r.status_code == status, (body, r.text)
            assert set(r.json()) == {"error"} and message in r.json()["error"] and "Traceback" not in r.text
        r = client.post("/v1/predict", json={"text": "the film"})  # the tagger at the classifier's route
        assert r.status_code == 400 and "is a token classification model" in r.json()["error"]
        schema = client.get("/openapi.json").json()
        assert "/v1/tag" in schema["paths"] and "TagResponse" in schema["components"]["schemas"]


def test_unknown_model_is_not_found(tagger_dir):
    with pytest.raises(ModelNotFoundError):
        bv.load_model("./no-such-tagger-folder", device="cpu")


def test_gradios_tag_endpoint_answers_as_the_library_and_refuses_a_classifier(tagger_dir, signal_model_dir, tmp_path):
    """The queued door a Space's API users take (gradio_client), on a served tagger: the library's JSON."""
    pytest.importorskip("gradio")
    from gradio_client import Client

    from conftest import served_app

    folder = str(tagger_dir("bert", "trained"))
    text = "the film was joy and it was a slog"
    want = bv.tag(bv.load_model(folder, device="cpu"), text)[0].to_dict()
    with served_app(folder, BERTVIZ_MODELS_DIR=tmp_path) as url:
        client = Client(url, verbose=False)
        got = client.predict(text, api_name="/tag")
        assert [(e["text"], e["label"], e["start"], e["end"]) for e in got["entities"]] == [
            (e["text"], e["label"], e["start"], e["end"]) for e in want["entities"]]
        assert {e["label"] for e in got["entities"]} == {"PER", "LOC"}  # the trained tagger finds both
        assert got["tokens"] == want["tokens"] and got["labels"] == want["labels"]
        with pytest.raises(Exception) as err:
            client.predict(text, str(signal_model_dir("bert")), api_name="/tag")
        assert "is a sequence classification model" in str(err.value) and "Traceback" not in str(err.value)
