"""The suite catches deliberate breaks (issue 37): each mutant of tests/mutants.py (IG scores halved or zeroed,
the delta's sign flipped, rows of a batch swapped, the ownership check skipped, ...) makes at least one of
its catchers fail, in a fresh process with only that patch applied; the same catchers pass unpatched
(the positive control, so a failure is the mutant's and not the setup's)."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mutants import MUTANTS, mutated_source

ROOT = Path(__file__).resolve().parent.parent


def run(catchers, report: Path, mutant: str | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """The catchers' pytest in a fresh process, with ``mutant`` applied."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT),
                                                        os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "mutants", "-p", "no:cacheprovider",
            "-o", "addopts=", "--mutant-report", str(report), *(["--mutant", mutant] if mutant else []), *catchers]
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_every_mutant_still_applies_to_the_code():
    """Each snippet occurs exactly once in its module and the patched source compiles."""
    import importlib.util

    for name, m in MUTANTS.items():
        source = Path(importlib.util.find_spec(m.module).origin).read_text(encoding="utf-8")
        compile(mutated_source(m, source), m.module, "exec")
        assert m.catchers, name


CONTROL = "(none)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every mutant's subprocess, and the unpatched control, started at once on the machine's cores (each
    is mostly one interpreter importing torch and building the fixture): {name: (completed process,
    report file)}, each awaited by the test that reads it."""
    folder = tmp_path_factory.mktemp("mutants")
    catchers = sorted({c for m in MUTANTS.values() for c in m.catchers})
    jobs = {name: (m.catchers, name) for name, m in MUTANTS.items()}
    jobs[CONTROL] = (catchers, None)
    pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
    futures = {name: (pool.submit(run, c, folder / f"{i}.txt", mutant), folder / f"{i}.txt")
               for i, (name, (c, mutant)) in enumerate(jobs.items())}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_mutant_is_caught(name, runs):
    future, report = runs[name]
    r = future.result()
    out = r.stdout + r.stderr
    # the patched module was the one imported
    assert report.is_file() and report.read_text().split() == [name], out[-3000:]
    assert r.returncode == 1 and " failed" in out, (  # a test failed (not an error of the setup)
        f"{name} ({MUTANTS[name].why}) was not caught by {MUTANTS[name].catchers}:\n{out[-3000:]}")


def test_the_catchers_pass_without_a_mutant(runs):
    future, report = runs[CONTROL]
    r = future.result()
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert not report.exists()
