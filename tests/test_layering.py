"""How the code is layered, checked on its source (issue 19):

- settings are read once, at the edge: no library module reads the environment or calls
  ``get_settings()``; only the entry points (``app.py``, the CLI, the server's entry point,
  ``config.Settings.from_env``) and bench scripts do;
- modules talk through public names: no module of the package, bench/ or tests/ imports another
  module's ``_``-names or reaches ``module._name`` (a private name is private to its module).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bertviz_app"
# The edge: what may read the environment (a name ending in "/": every module of that package).
EDGE = {"config.py", "cli/", "serve/server.py", "__main__.py"}


def _at_the_edge(rel: str) -> bool:
    return any(rel == edge or (edge.endswith("/") and rel.startswith(edge)) for edge in EDGE)


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _library_modules() -> list[Path]:
    return [p for p in _sources("bertviz_app") if not _at_the_edge(p.relative_to(PACKAGE).as_posix())]


def _environment_reads(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "unsetenv") and (
                isinstance(node.value, ast.Name) and node.value.id == "os"):
            found.append((node.lineno, f"os.{node.attr}"))
        elif isinstance(node, ast.Name) and node.id in ("get_settings", "getenv", "environ"):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in ("get_settings", "from_env"):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.ImportFrom) and any(
            a.name in ("environ", "getenv", "get_settings") for a in node.names
        ):
            found.append((node.lineno, f"from {node.module} import ..."))
    return found


@pytest.mark.parametrize("path", _library_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_library_modules_never_read_the_environment(path):
    reads = _environment_reads(ast.parse(path.read_text(encoding="utf-8")))
    assert not reads, f"{path.relative_to(ROOT)} reads settings itself (pass them in from the edge): {reads}"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _absolute(module: str | None, level: int, here: str, is_package: bool) -> str:
    if not level:
        return module or ""
    base = here.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _is_ours(name: str) -> bool:
    return name.split(".")[0] in ("bertviz_app", "bench", "conftest") or name.startswith("tests")


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_uses(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """Private names of our other modules that ``path`` (or ``source``, as if it were at ``path``) uses."""
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    here, is_package = _module_name(path), path.name == "__init__.py"
    modules: dict[str, str] = {}  # local name -> one of our modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_ours(alias.name):
                    modules[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node.module, node.level, here, is_package)
            if not _is_ours(source) or source == "__future__":
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append((node.lineno, f"from {source} import {alias.name}"))
                elif _is_module(f"{source}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{source}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            if node.value.id in modules and modules[node.value.id] != here:
                found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


@pytest.mark.parametrize("path", _sources("bertviz_app", "bench", "tests") + [ROOT / "app.py"],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_module_uses_another_modules_private_names(path):
    uses = _private_uses(path)
    assert not uses, f"{path.relative_to(ROOT)} uses other modules' private names (make them public): {uses}"


def test_the_checks_see_what_they_look_for():
    """The two checks above flag what they are written to flag (so a green run means something)."""
    reads = _environment_reads(ast.parse("import os\nx = os.environ.get('A')\nfrom .config import get_settings\n"
                                         "y = get_settings().max_chars\nz = os.getenv('B')\n"))
    assert sorted(what for _, what in reads) == sorted(["os.environ", "from config import ...", "get_settings",
                                                        "os.getenv"])
    probe = ("from ..models import registry\nfrom ..interpret.attribution import _secret\nx = registry._CACHE\n"
             "from . import guards\ny = guards._private_helper\nz = registry.__name__\n")
    assert sorted(what for _, what in _private_uses(PACKAGE / "ui" / "probe.py", probe)) == sorted(
        ["from bertviz_app.interpret.attribution import _secret", "registry._CACHE", "guards._private_helper"])


# ---------------------------------------------------------------------------- the house's floors (issue 31)
# Which package may import which: each imports only the ones listed below it (its own modules too), never one
# above. The shared kernel (config, errors, results) is the ground; the facade (``bertviz_app``, lazy) is for
# the doors above the service. Function-local and TYPE_CHECKING imports count like any other.
FLOORS = (
    ("kernel", ("config", "errors", "results")),
    ("models", ("models",)),  # finding, loading, families x heads, encoding, forward, predict, calibration, owners
    ("train", ("train",)),  # data intake, the training engine, the default build, the fine-tune service
    ("interpret", ("interpret",)),  # attention, context mixing, attributions and their methods, faithfulness, export
    ("evaluate", ("evaluate",)),  # evaluations, their files and stored runs, model comparison, [CLS] geometry
    ("service", ("service",)),  # the use cases the page, the JSON API and the CLI share; micro-batching; links
    ("ui", ("ui",)),  # the gradio page
    ("serve", ("serve",)),  # FastAPI app and routes (the page mounted on it), start-up page, allocator
    ("cli", ("cli", "__main__")),
)
FACADE_USERS = {"ui", "serve", "cli"}  # who may import the facade itself
ONLY_IN = {"gradio": "ui", "plotly": "ui", "fastapi": "serve", "uvicorn": "serve", "starlette": "serve"}


def _floor_of(module: str) -> int | None:
    """The floor (index into FLOORS) of one of our modules, ``bertviz_app.x.y``; None for the facade."""
    parts = module.split(".")[1:]
    if not parts:
        return None
    for i, (_, members) in enumerate(FLOORS):
        if parts[0] in members:
            return i
    raise AssertionError(f"{module} is on no floor of FLOORS: add its package to the table")


def _imports(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """Every module ``path`` imports (ours as ``bertviz_app...``, others by their top name), wherever the import
    stands: at the top, inside a function, under TYPE_CHECKING."""
    tree = ast.parse(source if source is not None else path.read_text(encoding="utf-8"))
    here, is_package = _module_name(path), path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, here, is_package)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((node.lineno, full if base.startswith("bertviz_app") and _is_module(full) else base))
    return found


def _violations(path: Path, source: str | None = None) -> list[str]:
    here = _module_name(path)
    floor = _floor_of(here)
    name = FLOORS[floor][0] if floor is not None else "facade"
    bad = []
    for line, module in _imports(path, source):
        top = module.split(".")[0]
        if top in ONLY_IN and ONLY_IN[top] != name:
            bad.append(f"line {line}: {module} outside {ONLY_IN[top]}/")
        if top != "bertviz_app" or floor is None:
            continue
        there = _floor_of(module)
        if there is None and name not in FACADE_USERS:
            bad.append(f"line {line}: the facade, from {name} (only {', '.join(sorted(FACADE_USERS))} use it)")
        elif there is not None and there > floor:
            bad.append(f"line {line}: {module} is on floor {FLOORS[there][0]}, above {name}")
    return bad


@pytest.mark.parametrize("path", _sources("bertviz_app"), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_module_imports_only_floors_below_its_own(path):
    bad = _violations(path)
    assert not bad, f"{path.relative_to(ROOT)} imports against the table FLOORS: {bad}"


def _our_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _sources("bertviz_app"):
        here = _module_name(path)
        graph[here] = {m for _, m in _imports(path) if m.startswith("bertviz_app.") and m != here}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each a circle of imports."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_modules_import_each_other_in_a_circle():
    assert _circles(_our_graph()) == []


def test_the_floor_checks_see_what_they_look_for():
    """Positive controls: an import up a floor (also inside a function, or under TYPE_CHECKING), the facade
    from the core, gradio outside ui/ and fastapi outside serve/ are each caught; a circle is found; imports
    down the table pass."""
    models = PACKAGE / "models" / "probe.py"
    assert _violations(models, "from ..evaluate import evaluation\n") == [
        "line 1: bertviz_app.evaluate.evaluation is on floor evaluate, above models"]
    assert len(_violations(models, "def f():\n    from ..service import batching\n")) == 1
    assert len(_violations(models, "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from ..ui import plots\n")) == 1
    assert len(_violations(models, "from .. import predict\n")) == 1
    assert len(_violations(models, "import gradio as gr\n")) == 1
    assert len(_violations(PACKAGE / "ui" / "probe.py", "import fastapi\n")) == 1
    ui = PACKAGE / "ui" / "probe.py"
    assert _violations(ui, "import gradio\nfrom .. import predict\nfrom ..evaluate import evaluation\n"
                           "from ..errors import InputError\n") == []
    assert _violations(models, "from ..errors import InputError\nfrom . import registry\n") == []
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


# ---------------------------------------------------------------------------- docs/layout.md, from the code
# One line per package (and kernel module), top floor first, each its package docstring's first sentence:
# ``python tests/test_layering.py`` writes the page; the test below fails when it has drifted.
LAYOUT = ROOT / "docs" / "layout.md"
OUTSIDE = (
    ("app.py", "the entry the Docker image runs: reads Settings.from_env() once and serves the app"),
    ("bench/", "benchmarks against a same-run peer (run.py, load.py, explain_csv.py, ...) and their results"),
    ("scripts/", "set-up, the container check, the generated docs pages and the README's images"),
    ("models/", "registered and fine-tuned models (weights git-ignored)"),
    ("tests/", "tests on tiny models with signal, each against an independent reference; mutants.py lists "
               "deliberate breaks the suite must catch; test_layering.py holds the floors"),
)


def _first_sentence(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    assert paragraph, f"{path.relative_to(ROOT)} needs a docstring: docs/layout.md is made from it"
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


def _package_rows(member: str) -> list[tuple[str, str]]:
    path = PACKAGE / member
    if path.is_dir():
        rows = [(f"bertviz_app/{member}/", _first_sentence(path / "__init__.py"))]
        for sub in sorted(p for p in path.iterdir() if (p / "__init__.py").is_file()):
            rows.append((f"bertviz_app/{member}/{sub.name}/", _first_sentence(sub / "__init__.py")))
        return rows
    return [(f"bertviz_app/{member}.py", _first_sentence(path.with_suffix(".py")))]


def layout_page() -> str:
    rows = [OUTSIDE[0]]
    for _, members in reversed(FLOORS):
        rows += [row for member in members if member != "__main__" for row in _package_rows(member)]
    rows += OUTSIDE[1:]
    width = max(len(path) for path, _ in rows) + 2
    lines = [f"{path:<{width}}{text}" for path, text in rows]
    return ("# Layout\n\nThe package by domain, one line each, top floor first: a package imports only those "
            "below it.\n`tests/test_layering.py` holds that table (FLOORS) and fails on an import against it, on "
            "a circle,\non gradio or plotly outside `ui/` and on FastAPI, Starlette or uvicorn outside `serve/`. "
            "It also checks\nthat settings are read once, at the edge (`app.py`, the CLI, `serve/server.py`), "
            "and that no module\nuses another's `_`-names. This page is generated from the packages' docstrings "
            "by\n`python tests/test_layering.py`.\n\n```\n" + "\n".join(lines) + "\n```\n")


def test_docs_layout_is_the_code_s_own():
    """docs/layout.md lists every package and kernel module on the table, top floor first, in its own words."""
    on_table = {m for _, members in FLOORS for m in members}
    here = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.stem != "__init__")}
    assert here == on_table, f"packages and modules not on FLOORS: {here ^ on_table}"
    assert LAYOUT.read_text(encoding="utf-8") == layout_page(), "run python tests/test_layering.py"


if __name__ == "__main__":
    LAYOUT.write_text(layout_page(), encoding="utf-8")
    print(f"wrote {LAYOUT.relative_to(ROOT)}")


def test_no_facade_name_is_shadowed_by_a_package():
    """Importing ``bertviz_app.x`` sets the attribute ``x`` of the package to the module, so a facade name
    that is also a package or module name (``bv.explain`` the function, ``bertviz_app/interpret/`` the folder)
    turns into the module once anything imports it. Positive control: a module name is seen as one."""
    import bertviz_app

    children = {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir()
                if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert {"config", "models", "cli"} <= children
    assert not set(bertviz_app.__all__) & children, set(bertviz_app.__all__) & children


LONGEST_FUNCTION = 80  # lines from its def to its last, docstring included (issue 31: read in a sitting)


def _long_functions(source: str) -> list[tuple[str, int]]:
    functions = [n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [(n.name, n.end_lineno - n.lineno + 1) for n in functions if n.end_lineno - n.lineno + 1 > LONGEST_FUNCTION]


def test_no_function_of_the_package_is_longer_than_one_can_read_in_a_sitting():
    """No function or method in ``bertviz_app/`` runs past ``LONGEST_FUNCTION`` lines. Positive control: a made-up
    function one line too long is seen, one at the limit is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(LONGEST_FUNCTION - 1))
    assert _long_functions(f"def at_the_limit():\n{body}\n") == []
    assert _long_functions(f"def one_too_long():\n{body}\n    y = 0\n") == [("one_too_long", LONGEST_FUNCTION + 1)]
    found = {p.relative_to(ROOT).as_posix(): long for p in _sources("bertviz_app")
             if (long := _long_functions(p.read_text(encoding="utf-8")))}
    assert not found, found
