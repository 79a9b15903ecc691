"""Write docs/settings.md from ``bertviz_app.config.Settings``: one row per field (its environment
variable, default, the Docker image's value where the Dockerfile sets one, and the field's help text),
so the page says what the code does. Run it after changing a field:

    python scripts/settings_doc.py

tests/test_packaging.py checks that the page lists every field's variable.
"""

from __future__ import annotations

import re
import sys
from dataclasses import MISSING, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bertviz_app.config import PROJECT_ROOT, Settings, env_name  # noqa: E402

INTRO = """# Settings

Every knob of the app is a field of `bertviz_app.config.Settings` with a plain default. The entry
points (`python app.py`, `bertviz-app`, the bench scripts) read them once from `BERTVIZ_*`
environment variables with `Settings.from_env()`; all are optional, and a bad value stops with a
message naming the variable. The library never reads the environment: pass a `Settings` (or the
values it holds) instead, e.g. `bv.load_model("default", settings=bv.Settings(max_chars=5000))`.
The speed options (attention kernels, sorting, the [CLS]-only last layer) change results by float
rounding at most, and the keyword argument of the same name changes one call only
(`predict(..., attention="eager")`).

This page is generated from the fields by `python scripts/settings_doc.py`.

| variable | default | Docker image | meaning |
|---|---|---|---|
"""


NOTES = """
Notes beyond the table:

- Attributions always run in fp32, whatever `BERTVIZ_GPU_DTYPE` says.
- `BERTVIZ_MAX_N_STEPS` also bounds the gradient evaluations an attribution with a `tolerance` (the
  default, adaptive steps) may spend.
- `BERTVIZ_MMAP_THRESHOLD_KB`: the served app also caps malloc arenas at 2; `MALLOC_MMAP_THRESHOLD_` /
  `MALLOC_ARENA_MAX` win when set. 1024 KiB costs no measurable speed (128 KiB cost Analyze 14%;
  `bertviz_app/serve/allocator.py`).
- Public mode (`BERTVIZ_PUBLIC=1`, set by the Docker image) and its limits: [deploy.md](deploy.md).
"""


def _value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, Path):
        try:
            return "./" + str(value.relative_to(PROJECT_ROOT))
        except ValueError:
            return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def docker_env(dockerfile: Path = ROOT / "Dockerfile") -> dict[str, str]:
    """The BERTVIZ_* variables the image sets (``ENV`` lines)."""
    text = dockerfile.read_text(encoding="utf-8").replace("\\\n", " ")
    found = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            found.update(re.findall(r"\b(BERTVIZ_[A-Z0-9_]+)=(\S+)", line))
    return found


def render() -> str:
    image = docker_env()
    rows = []
    for f in fields(Settings):
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        help_text = " ".join(f.metadata.get("help", "").split()).replace("|", "\\|")
        in_image = f"`{image[env_name(f)]}`" if env_name(f) in image else ""
        rows.append(f"| `{env_name(f)}` | `{_value(default)}` | {in_image} | {help_text} |")
    return INTRO + "\n".join(rows) + "\n" + NOTES


if __name__ == "__main__":
    out = ROOT / "docs" / "settings.md"
    out.write_text(render(), encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)} ({len(fields(Settings))} settings)")
