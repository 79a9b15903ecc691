"""SQuAD's exact match and token F1 (issue 33), written in the project: values computed by hand from the official
v2.0 evaluation script's definitions (the arithmetic is in each test), its edge cases (empty answers, punctuation
only, articles only, several gold answers, an unanswerable question), an independent reference written another way
(sorted token lists merged, the articles dropped token by token) on random answers, and the bootstrap intervals
against the normal approximation of a mean."""

from __future__ import annotations

import math
import random
import string

import numpy as np
import pytest

from bertviz_app.train.answer_metrics import (
    answer_scores,
    answer_tokens,
    exact_match,
    gold_answers,
    mean_intervals,
    normalize_answer,
    score_answer,
    token_f1,
)


# --------------------------------------------------------------------------- the reference, written another way
def reference_tokens(text: str) -> list[str]:
    """Lower, drop ASCII punctuation with str.translate, split, drop the article tokens (the same as the script's
    regex ``\\b(a|an|the)\\b`` on text whose only non-word characters are spaces)."""
    kept = text.lower().translate(str.maketrans("", "", string.punctuation)).split()
    return [t for t in kept if t not in ("a", "an", "the")]


def reference_f1(gold: str, predicted: str) -> float:
    """F1 from the two sorted token lists merged (common tokens with multiplicity), no Counter."""
    g, p = sorted(reference_tokens(gold)), sorted(reference_tokens(predicted))
    if not g or not p:
        return 1.0 if g == p else 0.0
    i = j = common = 0
    while i < len(g) and j < len(p):
        if g[i] == p[j]:
            common, i, j = common + 1, i + 1, j + 1
        elif g[i] < p[j]:
            i += 1
        else:
            j += 1
    return 2 * common / (len(g) + len(p))  # = 2PR / (P + R) with P = c/|p|, R = c/|g|


# --------------------------------------------------------------------------- by hand
@pytest.mark.parametrize("text, normalised", [
    ("The  Eiffel Tower!", "eiffel tower"),  # lower, "!" gone, "the" gone, spaces collapsed
    ("A.B.C.", "abc"),  # the dots go first, so "a" is no longer a word of its own
    ("an apple, the pear and a plum", "apple pear and plum"),
    ("theatre Another answer", "theatre another answer"),  # articles only as whole words
    ("(a)", ""),  # "(" and ")" go, then the article
    ("Café — Zürich…", "café — zürich…"),  # only ASCII punctuation is removed, as the script's string.punctuation
    ("  \t\n", ""),
])
def test_normalisation_is_squads(text, normalised):
    assert normalize_answer(text) == normalised


def test_f1_by_hand():
    # gold [denver, broncos], predicted [denver, broncos, team]: 2 in common, P = 2/3, R = 2/2,
    # F1 = 2 (2/3)(1) / (2/3 + 1) = (4/3) / (5/3) = 0.8
    assert token_f1("Denver Broncos", "the Denver Broncos team") == pytest.approx(0.8, rel=1e-12)
    # multiplicity: gold [new, york, new, york], predicted [new, york]: 2 in common, P = 1, R = 1/2, F1 = 2/3
    assert token_f1("New York, New York", "new york") == pytest.approx(2 / 3, rel=1e-12)
    # a predicted token repeated counts once per gold occurrence: gold [new, york], predicted [new, new, new, york]:
    # common min(1, 3) + min(1, 1) = 2, P = 2/4, R = 2/2, F1 = 2 (1/2)(1) / (3/2) = 2/3
    assert token_f1("new york", "new new new york") == pytest.approx(2 / 3, rel=1e-12)
    # gold [new, new, york], predicted [new, new]: common min(2, 2) = 2 (not 1, as a set would count), P = 2/2,
    # R = 2/3, F1 = 2 (1)(2/3) / (5/3) = 0.8
    assert token_f1("new new york", "new new") == pytest.approx(0.8, rel=1e-12)
    # nothing in common: 0; the same after normalisation: 1 (and exact)
    assert token_f1("Paris", "London") == 0.0
    assert token_f1("the Paris.", "paris") == 1.0 and exact_match("the Paris.", "paris") == 1
    # F1 1 does not mean exact: the same tokens in another order, F1 = 1, EM = 0
    assert token_f1("york new", "new york") == 1.0 and exact_match("york new", "new york") == 0


def test_empty_punctuation_only_and_articles_only_answers():
    assert (exact_match("", ""), token_f1("", "")) == (1, 1.0)  # both empty: they agree
    assert (exact_match("", "Paris"), token_f1("", "Paris")) == (0, 0.0)
    assert (exact_match("Paris", ""), token_f1("Paris", "")) == (0, 0.0)
    # punctuation only and articles only normalise to nothing, so they are "no answer" to the script
    for nothing in ("...", "the", "A", " an . "):
        assert answer_tokens(nothing) == [] and exact_match("", nothing) == 1 and token_f1("", nothing) == 1.0
    assert answer_tokens("") == []


def test_several_gold_answers_take_the_best_and_drop_empty_golds():
    golds = ["Denver Broncos", "Broncos", "the Denver Broncos"]
    # predicted [broncos, team]: vs [denver, broncos] P = 1/2, R = 1/2, F1 = 1/2; vs [broncos] P = 1/2, R = 1,
    # F1 = 2 (1/2) / (3/2) = 2/3; vs the third (normalised as the first) 1/2: the max is 2/3; no exact match
    em, f1 = score_answer(golds, "Broncos team")
    assert em == 0 and f1 == pytest.approx(2 / 3, rel=1e-12)
    assert score_answer(golds, "the broncos") == (1, 1.0)  # exact against "Broncos"
    # a gold that normalises to nothing is dropped when another remains: "the" is no gold answer here
    assert gold_answers(["the", "Paris"]) == ["Paris"]
    assert score_answer(["the", "Paris"], "") == (0, 0.0)
    # unanswerable (no gold answers, or only empty ones): the gold is [""], only an empty prediction scores
    assert gold_answers([]) == [""] and gold_answers(["", "."]) == [""]
    assert score_answer([], "") == (1, 1.0) and score_answer([], "Paris") == (0, 0.0)
    assert score_answer([], "the") == (1, 1.0)  # the script's own reading: "the" normalises to ""


def test_answer_scores_are_the_means_over_questions():
    golds = [["Paris"], ["New York, New York"], []]
    predicted = ["paris", "new york", "London"]
    s = answer_scores(golds, predicted, samples=0)
    # per question: EM 1, 0, 0 and F1 1, 2/3, 0 -> EM 1/3, F1 (1 + 2/3) / 3 = 5/9
    assert s["per_question"] == {"exact": [1.0, 0.0, 0.0], "f1": [1.0, pytest.approx(2 / 3), 0.0]}
    assert s["exact"] == pytest.approx(1 / 3, rel=1e-12) and s["f1"] == pytest.approx(5 / 9, rel=1e-12)
    assert s["n"] == 3 and s["interval"] is None
    with pytest.raises(ValueError, match="3 questions with gold answers but 2 predictions"):
        answer_scores(golds, predicted[:2])


# --------------------------------------------------------------------------- against the reference
def test_f1_and_exact_match_equal_the_reference_on_random_answers():
    rng = random.Random(0)
    words = ["the", "a", "an", "Paris", "paris,", "new", "York", "york.", "cat", "cats", "(1990)", "1990", "THE",
             "an.", "of", "x-ray", "xray", ""]

    def answer() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(0, 6)))

    seen = set()
    for _ in range(2000):
        gold, predicted = answer(), answer()
        want = reference_f1(gold, predicted)
        assert token_f1(gold, predicted) == pytest.approx(want, rel=1e-12, abs=1e-15), (gold, predicted)
        assert exact_match(gold, predicted) == int(reference_tokens(gold) == reference_tokens(predicted))
        seen.add(round(want, 3))
        # several golds: the best of them, those with no tokens dropped unless none is left (then [""])
        golds = [gold, answer(), answer()]
        kept = [g for g in golds if reference_tokens(g)] or [""]
        em, f1 = score_answer(golds, predicted)
        assert f1 == pytest.approx(max(reference_f1(g, predicted) for g in kept), rel=1e-12, abs=1e-15)
        assert em == max(int(reference_tokens(g) == reference_tokens(predicted)) for g in kept)
    assert len(seen) > 8  # the answers gave many different F1 values, not only 0 and 1


# --------------------------------------------------------------------------- intervals
def test_bootstrap_intervals_match_the_normal_approximation_of_a_mean():
    values = np.random.default_rng(1).binomial(1, 0.4, size=400).astype(float)  # (400,)
    mean = values.mean()
    lo, hi = mean_intervals({"exact": values}, seed=3)["exact"]
    assert lo < mean < hi
    want = 2 * 1.96 * math.sqrt(mean * (1 - mean) / len(values))  # the normal interval's width
    assert (hi - lo) == pytest.approx(want, rel=0.2)
    # seeded: the same numbers twice; another seed, other numbers
    assert mean_intervals({"exact": values}, seed=3)["exact"] == (lo, hi)
    assert mean_intervals({"exact": values}, seed=4)["exact"] != (lo, hi)
    # a constant column has a point interval; one row too; no rows or no samples: None
    assert mean_intervals({"f1": [0.5] * 9}) == {"f1": (0.5, 0.5)}
    assert mean_intervals({"f1": [0.25]}) == {"f1": (0.25, 0.25)}
    assert mean_intervals({"f1": []}) is None and mean_intervals({"f1": [1.0]}, samples=0) is None
    with pytest.raises(ValueError, match="different lengths"):
        mean_intervals({"exact": [1.0], "f1": [1.0, 0.0]})


def test_the_intervals_of_answer_scores_resample_both_columns_together():
    golds = [["p q"], ["c d"], ["e f"], ["g h"]] * 25  # 100 questions
    predicted = ["q", "c d", "x", "g h"] * 25  # F1 2/3, 1, 0, 1 and EM 0, 1, 0, 1
    s = answer_scores(golds, predicted, seed=0)
    (elo, ehi), (flo, fhi) = s["interval"]["exact"], s["interval"]["f1"]
    assert elo < s["exact"] < ehi and flo < s["f1"] < fhi
    # F1 >= EM for every question, and the same resamples score both: every F1 bound is at least the EM one
    assert flo >= elo and fhi >= ehi
