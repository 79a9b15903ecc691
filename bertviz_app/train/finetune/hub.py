"""Pushing a saved run to the Hugging Face Hub; the token goes to huggingface_hub only."""

from __future__ import annotations

import re
from pathlib import Path

import huggingface_hub

from ...errors import InputError
from ...models.catalog import DEFAULT_MODELS_DIR, RUN_INFO
from .runs import run_folder

__all__ = ["HUB_REPO", "push_run"]

HUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def push_run(run: str | None, repo_id: str | None, token: str | None, private: bool = True,
             models_dir: Path = DEFAULT_MODELS_DIR) -> str:
    """Upload a run folder (of the registry ``models_dir``) to a Hub model repository; returns the
    commit URL. The token goes to huggingface_hub only: never logged, never stored, scrubbed from any
    error message. ``run.json`` (it holds validation texts) stays behind."""
    path = run_folder(run, models_dir)
    repo_id = (repo_id or "").strip()
    token = (token or "").strip()
    if not HUB_REPO.match(repo_id) or ".." in repo_id:
        raise InputError("The repository id must look like owner/name (letters, digits, . _ -).")
    if not token:
        raise InputError("Give a Hugging Face write token (huggingface.co/settings/tokens) to push.")
    try:
        api = huggingface_hub.HfApi(token=token)
        api.create_repo(repo_id, private=bool(private), exist_ok=True, repo_type="model")
        info = api.upload_folder(folder_path=str(path), repo_id=repo_id, repo_type="model",
                                 ignore_patterns=[RUN_INFO], commit_message=f"Upload {run} from bertviz-app")
    except Exception as exc:  # noqa: BLE001 - network/auth errors become one clear line, token scrubbed
        first = (str(exc).splitlines() or [type(exc).__name__])[0].replace(token, "***")[:300]
        raise InputError(f"The push to {repo_id!r} failed: {first}") from None
    return getattr(info, "commit_url", None) or f"https://huggingface.co/{repo_id}"

