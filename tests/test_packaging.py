"""The package's declared surface: the facade's names, and pyproject's dependencies."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import bertviz_app

ROOT = Path(__file__).resolve().parent.parent


def test_facade_lists_each_name_once_and_every_name_resolves():
    names = bertviz_app.__all__
    assert len(names) == len(set(names))
    tree = ast.parse((ROOT / "bertviz_app" / "__init__.py").read_text(encoding="utf-8"))
    defined_here = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}
    assert set(names) == set(bertviz_app._WHERE) | defined_here
    for name in names:
        assert getattr(bertviz_app, name) is not None


def test_type_checking_imports_match_the_exports():
    """The static imports (for IDEs and type checkers) name exactly what _EXPORTS makes public."""
    tree = ast.parse((ROOT / "bertviz_app" / "__init__.py").read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    static = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1
        static[node.module] = tuple(sorted(alias.name for alias in node.names))
    assert static == {module: tuple(sorted(names)) for module, names in bertviz_app._EXPORTS.items()}


def test_functions_named_like_their_module_stay_functions():
    """``attention``, ``summary`` and ``faithfulness`` are both a module and its function: importing the
    module (another name from it, or a module that imports it) must not replace the function."""
    import subprocess
    import sys

    code = ("import bertviz_app as bv, types; bv.rollout; bv.cls_rows; import bertviz_app.methods; "
            "import bertviz_app.faithfulness, bertviz_app.summary; from bertviz_app import attention; "
            "import bertviz_app.attention as m; "
            "names = [n for n, mod in bv._WHERE.items() if n == mod]; assert names, names; "
            "assert all(callable(getattr(bv, n)) and not isinstance(getattr(bv, n), types.ModuleType) for n in names), "
            "[getattr(bv, n) for n in names]; assert callable(attention); print(sorted(names))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "faithfulness" in out.stdout and "attention" in out.stdout


def _requirements(path: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def test_pyproject_declares_the_pinned_runtime_dependencies():
    """``pip install .`` gets the same pins as requirements.txt (one list, checked equal), and
    never the two --no-deps packages (their own dependencies break numpy or pull spacy)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = project["dependencies"]
    pins = _requirements(ROOT / "requirements.txt")
    assert sorted(declared) == sorted(pins)
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.+-]*", d) for d in declared), declared
    nodeps = {re.split(r"[=<>]", line)[0].lower() for line in _requirements(ROOT / "requirements-nodeps.txt")}
    assert nodeps and not nodeps & {re.split(r"[=<>]", d)[0].lower() for d in declared}
