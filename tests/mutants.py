"""Mutants: small patches that break the engine on purpose, and the tests that must catch each (issue 37).

A pytest plugin (``-p mutants --mutant NAME``, with this folder on ``sys.path``): before anything imports
``bertviz_app``, it installs an import hook that compiles the mutant's module from its source with one
snippet replaced (the snippet must occur exactly once, so a mutant that no longer applies is an error, not a
silent pass) and, once that module is imported, writes the mutant's name to the file ``--mutant-report``
names (pytest captures what a test prints, and an import may happen during collection). ``tests/test_mutations.py``
runs each mutant's catchers in a subprocess and requires them to fail, and runs all catchers unmutated as
the positive control. When the engine changes, a mutant's snippet follows it here.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Mutant:
    module: str  # dotted name of the module patched
    old: str  # a snippet of its source, found exactly once
    new: str  # what it becomes
    why: str  # the break, in words
    catchers: tuple[str, ...]  # test node ids (relative to the repository) of which at least one must fail


REFERENCE = "tests/test_core.py::test_integrated_gradients_equal_an_independent_reference[a gorgeous, moving film!-pad]"

MUTANTS: dict[str, Mutant] = {
    "ig-scores-halved": Mutant(
        "bertviz_app.interpret.ig_engine",
        "scores = np.sum([p.scores for p in pieces], axis=0)[: len(info.tokens)]",
        "scores = 0.5 * np.sum([p.scores for p in pieces], axis=0)[: len(info.tokens)]",
        "Integrated Gradients returns half of every score",
        (REFERENCE,)),
    "ig-scores-zeroed": Mutant(
        "bertviz_app.interpret.ig_engine",
        "scores = np.sum([p.scores for p in pieces], axis=0)[: len(info.tokens)]",
        "scores = 0.0 * np.sum([p.scores for p in pieces], axis=0)[: len(info.tokens)]",
        "Integrated Gradients returns all-zero scores (its delta still computed from them)",
        (REFERENCE,)),
    "ig-delta-sign-flipped": Mutant(
        "bertviz_app.interpret.ig_engine",
        "delta=float(sum(p.err for p in pieces)),",
        "delta=-float(sum(p.err for p in pieces)),",
        "the convergence delta's sign flipped",
        ("tests/test_speed_options.py::test_attribute_equals_captum_layer_integrated_gradients[pad]",)),
    "ig-adaptive-tolerance-loosened": Mutant(
        "bertviz_app.interpret.ig_engine",
        "allowed = max(tolerance * gap, 1e-6)",
        "allowed = max(10 * tolerance * gap, 1e-6)",
        "adaptive steps stop at ten times the asked relative delta",
        ("tests/test_speed_options.py::test_adaptive_steps_start_small_and_grow",
         "tests/test_speed_options.py::test_adaptive_steps_meet_the_tolerance[pad-0.05]")),
    "ig-batch-rows-swapped": Mutant(
        "bertviz_app.interpret.attribution",
        "for i, res in zip(idx, engine.integrated_gradients(n_steps, tolerance)):",
        "for i, res in zip(idx[1:2] + idx[:1] + idx[2:], engine.integrated_gradients(n_steps, tolerance)):",
        "a batch of texts gets the first two texts' attributions swapped",
        ("tests/test_speed_options.py::test_attribute_many_equals_one_call_per_text[None]",)),
    "zero-baseline-is-pad": Mutant(
        "bertviz_app.interpret.ig_engine",
        '            if baseline == "zero":',
        "            if False:",
        'the "zero" baseline silently computed as "pad"',
        ("tests/test_core.py::test_pad_and_zero_baselines_give_different_attributions",)),
    "predict-batch-rows-swapped": Mutant(
        "bertviz_app.models.inference",
        "probs = probabilities(lm, logits, calibrated=bool(calibrated)).numpy()  # (N, C)",
        "probs = probabilities(lm, logits, calibrated=bool(calibrated)).numpy()[[1, 0, *range(2, len(logits))] "
        "if len(logits) > 1 else slice(None)]",
        "a batch's first two texts get each other's probabilities",
        ("tests/test_core.py::test_batched_and_single_predictions_agree",)),
    "ownership-check-skipped": Mutant(
        "bertviz_app.models.visitors",
        "run_owner(path) != owner \\\n",
        "False \\\n",
        "public mode: any visitor's token opens any visitor's run",
        ("tests/test_public_mode.py::test_the_gradio_api_over_raw_http_reaches_the_apps_ownership_check",)),
    "answer-span-band-short": Mutant(
        "bertviz_app.models.answering",
        "width = min(max_len, n)",
        "width = max(1, min(max_len - 1, n))",
        "answers lose their longest spans: the band of ends after a start is one short",
        ("tests/test_answering.py::test_the_best_spans_are_every_pairs_best_in_a_stable_order_ties_included",)),
}


def mutated_source(mutant: Mutant, source: str) -> str:
    n = source.count(mutant.old)
    if n != 1:
        raise RuntimeError(f"the mutant's snippet occurs {n} times in {mutant.module} (must be once): "
                           f"{mutant.old!r}; update tests/mutants.py to follow the code")
    return source.replace(mutant.old, mutant.new)


class _Loader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, name: str, mutant: Mutant, report: str | None):
        super().__init__(fullname, path)
        self.mutant_name, self.mutant, self.report = name, mutant, report

    def get_code(self, fullname):  # never the cached bytecode of the unmutated source
        source = mutated_source(self.mutant, Path(self.path).read_text(encoding="utf-8"))
        return compile(source, self.path, "exec", dont_inherit=True)

    def exec_module(self, module):
        super().exec_module(module)
        if self.report:
            with open(self.report, "a", encoding="utf-8") as f:
                f.write(f"{self.mutant_name}\n")


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, mutant: Mutant, report: str | None):
        self.name, self.mutant, self.report = name, mutant, report

    def find_spec(self, fullname, path, target=None):
        if fullname != self.mutant.module:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not str(spec.origin).endswith(".py"):
            return None
        spec.loader = _Loader(fullname, spec.origin, self.name, self.mutant, self.report)
        return spec


def pytest_addoption(parser):
    parser.addoption("--mutant", default=None, help="apply this mutant of tests/mutants.py (a deliberate break)")
    parser.addoption("--mutant-report", default=None, help="a file the applied mutant's name is appended to")


def pytest_configure(config):
    name = config.getoption("--mutant")
    if not name:
        return
    if name not in MUTANTS:
        raise SystemExit(f"unknown mutant {name!r}; known: {', '.join(MUTANTS)}")
    mutant = MUTANTS[name]
    if mutant.module in sys.modules:
        raise SystemExit(f"{mutant.module} was imported before the mutant could be applied")
    sys.meta_path.insert(0, _Finder(name, mutant, config.getoption("--mutant-report")))
