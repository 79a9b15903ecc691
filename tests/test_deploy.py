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
