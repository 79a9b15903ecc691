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
    probe = ("from ..models import registry\nfrom ..explain.attribution import _secret\nx = registry._CACHE\n"
             "from . import common\ny = common._private_helper\nz = registry.__name__\n")
    assert sorted(what for _, what in _private_uses(PACKAGE / "ui" / "probe.py", probe)) == sorted(
        ["from bertviz_app.explain.attribution import _secret", "registry._CACHE", "common._private_helper"])
