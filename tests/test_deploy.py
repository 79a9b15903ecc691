"""The Docker Space deployment: there is no Docker engine in CI, so the Dockerfile's structure
is checked here, and CI itself runs the same scripts/setup.sh the image runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
LINES = [line.strip() for line in DOCKERFILE.splitlines() if line.strip() and not line.strip().startswith("#")]


def index_of(pattern: str) -> int:
    for i, line in enumerate(LINES):
        if re.search(pattern, line):
            return i
    raise AssertionError(f"no Dockerfile line matches {pattern!r}")


def test_slim_python_base_and_non_root_uid_1000():
    assert re.match(r"FROM python:3\.\d+-slim", LINES[0])
    assert index_of(r"useradd .*-u 1000") < index_of(r"^USER user")


def test_requirements_installed_before_the_code_is_copied():
    assert (index_of(r"COPY .*requirements\.txt") < index_of(r"RUN pip install .*requirements\.txt")
            < index_of(r"^COPY --chown=user \. \."))


def test_same_setup_script_as_the_readme_builds_the_model_in_the_image():
    build = index_of(r"RUN .*bash scripts/setup\.sh --build-model")
    assert build > index_of(r"^USER user")  # the model is built as the user that serves it
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/setup.sh && python app.py" in readme
    assert "bash scripts/setup.sh --dev && python -m pytest -q" in readme
    assert "bash scripts/setup.sh --dev && python -m pytest -q" in (ROOT / ".ci" / "run").read_text()


def test_port_healthcheck_and_command():
    assert "EXPOSE 7860" in LINES
    assert index_of(r"^HEALTHCHECK") < index_of(r"^CMD")
    assert LINES[-1] == 'CMD ["python", "app.py"]'
    assert "BERTVIZ_ALLOW_LOCAL_PATHS=0" in DOCKERFILE  # a public Space cannot open server folders


def test_dockerignore_keeps_weights_and_git_out():
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".git" in ignored and "models/*" in ignored


def test_readme_front_matter_configures_a_docker_space():
    readme = (ROOT / "README.md").read_text()
    front = readme.split("---")[1]
    assert re.search(r"^sdk: docker$", front, re.M) and re.search(r"^app_port: 7860$", front, re.M)
    assert re.search(r"^title: .+$", front, re.M) and re.search(r"^emoji: .+$", front, re.M)


def test_every_setting_is_documented():
    from dataclasses import fields

    from bertviz_app.config import Settings, env_name

    page = (ROOT / "docs" / "settings.md").read_text()
    for f in fields(Settings):
        assert f"`{env_name(f)}`" in page, f"{env_name(f)} is not in docs/settings.md (python scripts/settings_doc.py)"


def test_app_listens_on_loopback_unless_told_and_the_image_says_every_interface():
    from bertviz_app.cli import build_parser
    from bertviz_app.config import Settings

    assert Settings().host == "127.0.0.1"  # python app.py / serve: this machine only
    assert Settings.from_env({}).host == "127.0.0.1"
    assert build_parser(Settings()).parse_args(["serve"]).host == "127.0.0.1"
    assert build_parser(Settings()).parse_args(["serve", "--host", "0.0.0.0"]).host == "0.0.0.0"
    told = Settings.from_env({"BERTVIZ_HOST": "0.0.0.0"})
    assert told.host == "0.0.0.0" and build_parser(told).parse_args(["serve"]).host == "0.0.0.0"
    # the container sets it explicitly
    assert re.search(r"^ENV .*\bBERTVIZ_HOST=0\.0\.0\.0\b", DOCKERFILE.replace("\\\n", " "), re.M)


def test_the_image_runs_in_public_mode_and_the_deploy_page_says_what_it_changes():
    from bertviz_app.config import Settings

    assert Settings().public is False and Settings.from_env({}).public is False  # locally every run stays shared
    assert re.search(r"^ENV .*\bBERTVIZ_PUBLIC=1\b", DOCKERFILE.replace("\\\n", " "), re.M)
    space = (ROOT / "docs" / "deploy.md").read_text()
    assert "### Public mode (`BERTVIZ_PUBLIC=1`" in space and "Delete my data" in space


def test_setup_script_gets_no_pip_option_before_pips_command():
    # setup.sh runs `$PIP install ...`: PIP="pip --user" made pip see `--user` before `install` and stop the
    # build with "no such option: --user". Options go in pip's own environment (PIP_USER=1) instead.
    for line in LINES:
        assert not re.search(r"\bPIP=[\"']?[^\"']*\bpip3?\s+-", line), line


def test_the_container_check_is_a_maintainers_script_not_ci():
    script = ROOT / "scripts" / "container_check.sh"
    assert script.is_file() and "buildah bud --isolation chroot" in script.read_text()
    assert "container_check" not in (ROOT / ".ci" / "run").read_text()  # CI has no buildah and 90 minutes


# --- which torch the image gets (TORCH=cpu|cuda) ------------------------------------------------------
def torch_step() -> str:
    """The Dockerfile's RUN that installs torch, continuation lines joined."""
    joined = DOCKERFILE.replace("\\\n", " ")
    runs = [line for line in joined.splitlines() if line.startswith("RUN ") and 'case "$TORCH"' in line]
    assert len(runs) == 1, runs
    return runs[0]


def run_torch_step(torch: str | None, cpu_index: str | None = "https://example.invalid/whl/cpu"):
    """The torch step's shell under /bin/sh, with pip and python recorded instead of run: (rc, stderr, calls)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for tool in ("pip", "python"):
            fake = Path(tmp) / tool
            fake.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\t" "$a"; done >> {tmp}/calls\n'
                            f'echo >> {tmp}/calls\n')
            fake.chmod(0o755)
        env = {"PATH": f"{tmp}:/usr/bin:/bin"}
        if torch is not None:
            env["TORCH"] = torch
        if cpu_index is not None:
            env["TORCH_CPU_INDEX"] = cpu_index
        done = subprocess.run(["/bin/sh", "-c", torch_step()[len("RUN "):]], env=env,
                              capture_output=True, text=True, timeout=60)
        calls_file = Path(tmp) / "calls"
        lines = calls_file.read_text().splitlines() if calls_file.exists() else []
        calls = [line.rstrip("\t").split("\t") for line in lines]
    return done.returncode, done.stderr, calls


def requirements_torch_pin() -> str:
    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("torch==")]
    assert len(pins) == 1, pins
    return pins[0].split("==", 1)[1].split()[0]


def test_torch_build_arg_defaults_to_cpu_from_torchs_cpu_index():
    args = dict(re.findall(r"^ARG (\w+)=(\S*)$", DOCKERFILE, re.M))
    assert args["TORCH"] == "cpu"  # the free CPU Space by default
    assert args["TORCH_CPU_INDEX"] == "https://download.pytorch.org/whl/cpu"
    version = requirements_torch_pin()
    rc, err, calls = run_torch_step(args["TORCH"], args["TORCH_CPU_INDEX"])
    assert rc == 0, err
    pip = calls[0]
    assert pip[:2] == ["install", "-q"] and pip[-1] == f"torch=={version}+cpu"
    assert pip[pip.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert calls[1][0] == "-c" and calls[1][-1] == "cpu"  # the check that the installed torch is the cpu build


def test_torch_cpu_without_an_index_uses_pips_own_sources():
    # scripts/container_check.sh passes TORCH_CPU_INDEX= where torch's index is out of reach and a local
    # folder holds the CPU wheel: still the +cpu pin, so PyPI's CUDA build cannot answer it.
    rc, err, calls = run_torch_step("cpu", "")
    assert rc == 0, err
    assert calls[0] == ["install", "-q", f"torch=={requirements_torch_pin()}+cpu"]


def test_torch_cuda_is_pypis_build_and_exactly_the_pinned_version():
    rc, err, calls = run_torch_step("cuda")
    assert rc == 0, err
    # "===": exactly 2.13.0, so 2.13.0+cpu (which "==" would accept, and pip would prefer) cannot stand in;
    # no index option: PyPI, whose Linux torch is the CUDA build
    assert calls[0] == ["install", "-q", f"torch==={requirements_torch_pin()}"]
    assert calls[1][-1] == "cuda"


def test_an_unknown_torch_value_stops_the_build_with_a_clear_message():
    for value in ("gpu", "CPU", ""):
        rc, err, calls = run_torch_step(value)
        assert rc != 0 and calls == [], (value, rc, calls)
        assert "TORCH must be cpu" in err and "cuda" in err and f"not '{value}'" in err, err


def test_the_deploy_page_says_how_to_pick_each_torch():
    page = (ROOT / "docs" / "deploy.md").read_text()
    assert "docker build --build-arg TORCH=cuda ." in page and "`TORCH_CPU_INDEX`" in page
    assert "scripts/container_check.sh --torch cuda" in (ROOT / "scripts" / "container_check.sh").read_text()


def test_torch_is_installed_before_the_requirements_which_keep_the_same_pin():
    assert index_of(r'case "\$TORCH"') < index_of(r"RUN pip install .*-r requirements\.txt")
    assert requirements_torch_pin() == "2.13.0"
    assert re.search(r'"torch===' + re.escape(requirements_torch_pin()) + '"', torch_step())


def test_the_container_check_builds_either_torch_and_tags_them_apart():
    script = (ROOT / "scripts" / "container_check.sh").read_text()
    assert '--build-arg "TORCH=$torch"' in script and '"${build_args[@]}"' in script
    assert "bertviz-app:check-$torch" in script
    import os
    import subprocess
    import tempfile

    # Run as root (as here), a script that took the value would go on to build: a stand-in `id` says uid 1000,
    # so it would stop at its root check instead ("run as root", exit 1) and this test would fail.
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "id").write_text("#!/bin/sh\necho 1000\n")
        (Path(tmp) / "id").chmod(0o755)
        env = {**os.environ, "PATH": f"{tmp}:{os.environ['PATH']}"}
        script = str(ROOT / "scripts" / "container_check.sh")
        for argv, message in ((["--torch", "gpu"], "--torch must be cpu or cuda, not 'gpu'"),
                              (["--torch=gpu"], "--torch must be cpu or cuda, not 'gpu'"),
                              (["--torch"], "--torch needs a value"),
                              (["--torch", "cuda"], "run as root"),  # the positive control: a value it takes
                              (["--torch=cpu"], "run as root"),
                              (["--no-build", "--torch", "cuda"], "run as root"),
                              (["--no-biuld"], "unknown option: --no-biuld")):
            done = subprocess.run(["bash", script, *argv], capture_output=True, text=True, timeout=60, env=env)
            assert done.returncode == (1 if message == "run as root" else 2), (argv, done)
            assert message in done.stderr, (argv, done.stderr)


def test_the_torch_step_fails_when_the_installed_torch_is_the_other_build():
    # The step ends by importing torch and comparing its CUDA version with TORCH: run that check for real
    # against a stand-in torch module, each build against each TORCH value.
    import subprocess
    import sys
    import tempfile

    code = run_torch_step("cpu")[2][1]
    assert code[0] == "-c"
    with tempfile.TemporaryDirectory() as tmp:
        for torch_cuda, wanted, ok in ((None, "cpu", True), ("13.0", "cuda", True),
                                       ("13.0", "cpu", False), (None, "cuda", False)):
            (Path(tmp) / "torch").mkdir(exist_ok=True)
            (Path(tmp) / "torch" / "__init__.py").write_text(
                f"__version__ = '2.13.0'\nclass version:\n    cuda = {torch_cuda!r}\n")
            done = subprocess.run([sys.executable, *code[:2], wanted], capture_output=True, text=True,
                                  timeout=60, env={"PYTHONPATH": tmp})
            assert (done.returncode == 0) is ok, (torch_cuda, wanted, done)
            if not ok:
                assert f"this torch is not the {wanted} build" in done.stderr
