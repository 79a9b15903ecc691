"""Finding and loading models: registered names under ``models/``, local folders, Hub ids.

Safety rules enforced here, once, for every entry point:
- ``trust_remote_code`` is never passed: no code from a model repo runs;
- weights load from safetensors only (a pickle ``.bin`` checkpoint is refused, never opened);
- registered names are confined to ``models/`` (no ``..``, no absolute paths through a name);
- Hub ids are validated before any network use, and an unreachable Hub fails in seconds.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from transformers import (
    AutoConfig,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers import logging as hf_logging

from ..config import Settings
from ..errors import InputError, ModelLoadError, ModelNotFoundError
from .build_job import TAGGER, not_built_message
from .calibration import load_temperature
from .catalog import BUILD_INFO, DEFAULT_MODELS_DIR, is_model_folder, list_models, load_run_info, shipped_model
from .families import SUPPORTED_MODEL_TYPES, family_for_type, family_of
from .heads import SEQUENCE_CLASSIFICATION, Head, head_for, head_of

__all__ = ["LoadedModel", "load_model", "model_folder", "list_models", "resolve_device", "clear_cache",
           "clean_stale_folders", "cached_models", "load_from_folder", "trained_on_pairs", "pair_notice"]

log = logging.getLogger(__name__)

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
FRESH_HEAD_WARNING = (
    "This checkpoint has no trained classification head: a fresh, randomly initialised head "
    "was added, so its predictions are meaningless until you fine-tune it."
)


@dataclass(eq=False)
class LoadedModel:
    """A model ready for the analyses: weights, tokenizer and what the UI needs to say about it."""

    name: str
    source: str  # "registered", "folder" or "hub"
    path: Path
    model: PreTrainedModel  # eval mode, on ``device``, in ``dtype``
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype
    warnings: tuple[str, ...] = ()
    # What the analyses of this model read: the input limits (max_chars, max_batch_texts, max_n_steps,
    # max_method_seconds, min_change), the speed options' defaults and cpu_int8. ``load_model`` sets
    # the settings it was given; a call's own keyword arguments override the speed options.
    settings: Settings = field(default_factory=Settings, repr=False)
    # Attributions kept by ``memo`` (LRU; 0: no cache). ``load_model`` sets it from the settings'
    # ``memo_size`` when the model is loaded.
    memo_size: int = 256
    # Temperature scaling from the folder's calibration.json (``calibration.load_temperature``; 1.0 when
    # there is none or it is unusable). Predict divides a single-label model's logits by it unless asked
    # for the raw probabilities; attributions, the [CLS] lens and faithfulness use the raw logits.
    temperature: float = 1.0
    # Whether the model was trained on sentence pairs (``trained_on_pairs`` of its folder, read once at load):
    # True or False from its record, None when nothing says (a Hub model, the bare encoder, an operator's folder)
    pairs: bool | None = None
    _fp32: PreTrainedModel | None = field(default=None, repr=False)
    _int8: torch.nn.Module | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Held around every analysis's forward passes. Nothing in the core changes the shared model
    # per request any more (options go through ``forward.classifier_logits``, and Captum's
    # IntegratedGradients on input vectors registers no hooks), so the lock is not needed for
    # correctness; it serialises the heavy passes on one device (two at once on a CPU only share
    # its cores and both finish later) and protects callers that hook the shared modules
    # (Captum's Layer* methods, as the tests use them).
    run_lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    # Recent attributions by their full arguments (``memo``): the same explanation asked again
    # (an example text clicked by every visitor, a baseline toggled back) costs nothing.
    _memo: OrderedDict = field(default_factory=OrderedDict, repr=False)

    @property
    def labels(self) -> tuple[str, ...]:
        id2label = self.model.config.id2label
        return tuple(str(id2label[i]) for i in range(self.model.config.num_labels))

    @property
    def head(self) -> Head:
        """What the model answers (``heads.py``): how its logits decode, what is explained; read from the class it
        was loaded as, as the forward pass reads it."""
        return head_of(self.model)

    def require_head(self, head: Head, doing: str) -> None:
        """InputError unless this model has ``head``: ``doing`` (e.g. "predict classifies whole texts") says what
        needs it, and the message names the head the model has and where that head is used instead."""
        has = self.head
        if has is head:
            return
        labels = ", ".join(self.labels[:8]) + (", ..." if len(self.labels) > 8 else "")
        labels = "" if has.reads == "span" else f"; labels {labels}"  # a span head's two logits are no labels
        raise InputError(
            f"{self.name} is a {has.name} model ({type(self.model).__name__}{labels}): {doing}, which needs a "
            f"{head.name} model (...{head.suffix}). Use {has.doors or 'another command'} for this model, or choose a "
            f"...{head.suffix} model.")

    @property
    def multi_label(self) -> bool:
        return self.model.config.problem_type == "multi_label_classification"

    @property
    def max_length(self) -> int:
        tok_max = self.tokenizer.model_max_length
        fam = family_of(self.model)
        pos_max = fam.max_tokens(self.model.config) if fam is not None else self.model.config.max_position_embeddings
        return int(min(tok_max, pos_max)) if tok_max and tok_max < 10**6 else int(pos_max)

    @property
    def num_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def device_label(self) -> str:
        """What the UI shows, e.g. "cpu" or "cuda, bf16"."""
        if self.device.type == "cpu" and self.dtype == torch.float32:
            return "cpu, int8 predictions" if self.settings.cpu_int8 else "cpu"
        return f"{self.device.type}, {_DTYPE_NAMES.get(self.dtype, str(self.dtype))}"

    def with_settings(self, **changes) -> LoadedModel:
        """The same weights under other settings (``max_chars=1000``, ``cpu_int8=True``...): a new
        handle with its own result cache, sharing the model, its fp32 copy and its run lock."""
        from dataclasses import replace

        settings = replace(self.settings, **changes)
        new = replace(self, settings=settings,
                      memo_size=settings.memo_size if "memo_size" in changes else self.memo_size,
                      _int8=None if "cpu_int8" in changes else self._int8, _memo=OrderedDict())
        new.run_lock = self.run_lock
        return new

    def fp32_model(self) -> PreTrainedModel:
        """The model in float32 on the same device: attributions always run in fp32, even when
        inference runs in bf16/fp16 on a GPU. Made once, on first use."""
        if self.dtype == torch.float32:
            return self.model
        with self._lock:
            if self._fp32 is None:
                import copy

                self._fp32 = copy.deepcopy(self.model).float().eval()
            return self._fp32

    def predict_model(self) -> PreTrainedModel:
        """The model predictions run on: ``model``, or with ``settings.cpu_int8`` on a CPU a copy whose
        Linear layers are int8 dynamically quantised (made once, on first use)."""
        if self.device.type != "cpu" or not self.settings.cpu_int8:
            return self.model
        with self._lock:
            if self._int8 is None:
                import copy

                # torch 2.13 (pinned) marks quantized tensor creation deprecated in favour of torchao;
                # it still works here, and the pin keeps it so.
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*")
                    self._int8 = torch.ao.quantization.quantize_dynamic(
                        copy.deepcopy(self.fp32_model()), {torch.nn.Linear}, dtype=torch.qint8).eval()
            return self._int8

    def memo(self, key: tuple, compute):
        """``compute()`` once per ``key`` among the last ``memo_size`` keys (LRU). Results are frozen
        records whose arrays are made read-only, so sharing them is safe."""
        try:
            hash(key)
        except TypeError:  # unhashable arguments: let the analysis refuse them with its own message
            return compute()
        size = self.memo_size
        if size <= 0:
            return compute()
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
        value = compute()
        for v in vars(value).values() if hasattr(value, "__dict__") else ():
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
        with self._lock:
            self._memo[key] = value
            while len(self._memo) > size:
                self._memo.popitem(last=False)
        return value

    def clear_memo(self) -> None:
        """Forget every result ``memo`` keeps (a benchmark's cold run, a test's own cache)."""
        with self._lock:
            self._memo.clear()

    def label_index(self, label: str | int | None) -> int | None:
        """Class index from a label name (case-insensitive) or an index; None stays None."""
        if label is None or label == "":
            return None
        labels = self.labels
        if isinstance(label, int) or (isinstance(label, str) and label.isdigit() and label not in labels):
            idx = int(label)
            if 0 <= idx < len(labels):
                return idx
        else:
            lowered = [lab.lower() for lab in labels]
            if str(label).lower() in lowered:
                return lowered.index(str(label).lower())
        raise InputError(f"Unknown class {label!r}: this model's classes are {', '.join(labels)}.")


_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
_CACHE: dict[tuple, LoadedModel] = {}
_CACHE_LOCK = threading.Lock()


def resolve_device(device: str = "auto") -> torch.device:
    """"auto" picks CUDA, then Apple MPS, then the CPU."""
    if device in (None, "", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ModelLoadError(f"Unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps.") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("Device 'cuda' was asked for but no CUDA GPU is available: use --device auto or cpu.")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ModelLoadError("Device 'mps' was asked for but Apple MPS is not available: use --device auto or cpu.")
    return dev


def _inference_dtype(device: torch.device, gpu_dtype: str) -> torch.dtype:
    if device.type != "cuda" or gpu_dtype == "fp32":
        return torch.float32
    if gpu_dtype == "fp16":
        return torch.float16
    if gpu_dtype == "bf16" or torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16


# is_model_folder and list_models live in catalog.py (no torch: `bertviz-app models` starts in a
# fraction of a second); list_models is re-exported here for the callers that import it from registry.


def clean_stale_folders(models_dir: Path = DEFAULT_MODELS_DIR, max_age_s: float = 3600) -> list[Path]:
    """Remove ``.tmp-*`` / ``.old-*`` folders (left by a kill during a save) older than
    ``max_age_s`` from models/ and models/runs/. Younger ones may be a save in progress in
    another process and are kept; they are never listed either way. Returns what was removed."""
    import shutil
    import time

    removed = []
    root = Path(models_dir)
    for folder in (root, root / "runs"):
        if not folder.is_dir():
            continue
        for p in folder.iterdir():
            if p.is_dir() and p.name.startswith((".tmp-", ".old-")) and time.time() - p.stat().st_mtime > max_age_s:
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
    for p in removed:
        log.warning("removed a half-written model folder left by an interrupted save: %s", p)
    return removed


def _local_alternatives(root: Path) -> str:
    names = [m["name"] for m in list_models(root) if m["built"]]
    return ", ".join(names) if names else "none built yet (run: python -m bertviz_app build-default)"


def _resolve(name_or_path: str, allow_paths: bool, root: Path) -> tuple[str, Path | str]:
    """-> ("registered" | "folder", Path) or ("hub", repo_id); registered names live in ``root``."""
    root = Path(root)
    name = (name_or_path or "").strip()
    if not name:
        raise ModelNotFoundError("No model given: use 'default', a folder saved with save_pretrained, or a Hub id.")
    if "\x00" in name or len(name) > 300:
        raise ModelNotFoundError("That model name is not valid: use 'default', a registered run name, a folder "
                                 "or a Hub id.")
    shipped = shipped_model(name, root)  # the bare pip-shipped encoder (fresh head), as list_models lists it
    if shipped is not None:
        return "registered", shipped.path()
    # 1. registered: "default", "<name>", "runs/<name>" -- confined to models/
    parts = name.split("/")
    if name in ("default", TAGGER) or (len(parts) == 1 and _NAME_RE.match(name) and (root / name).is_dir()) or (
        len(parts) == 2 and parts[0] == "runs" and _NAME_RE.match(parts[1])
    ):
        path = (root / name).resolve()
        if not path.is_relative_to(root.resolve()):
            raise ModelNotFoundError(f"Model name {name!r} points outside the models folder.")
        if not is_model_folder(path):
            if name in ("default", TAGGER):
                raise ModelNotFoundError(not_built_message(root, name))
            raise ModelNotFoundError(f"No registered model {name!r}. Available: {_local_alternatives(root)}.")
        return "registered", path
    # 2. a local folder the user typed (the CLI's --model ./my-model, or an absolute path)
    looks_like_path = name.startswith((".", "/", "~", "\\")) or os.sep in name and Path(name).expanduser().exists()
    if looks_like_path and not allow_paths:
        raise ModelNotFoundError(
            f"Opening model folders by path is turned off here (BERTVIZ_ALLOW_LOCAL_PATHS=0): use a registered "
            f"name or a Hub id. Available models: {_local_alternatives(root)}."
        )
    if looks_like_path:
        path = Path(name).expanduser().resolve()
        if not path.is_dir():
            raise ModelNotFoundError(f"Folder {name!r} does not exist. Available models: {_local_alternatives(root)}.")
        if not is_model_folder(path):
            raise ModelNotFoundError(
                f"Folder {name!r} has no config.json, so it is not a saved model (save one with "
                f"save_pretrained()). Available models: {_local_alternatives(root)}."
            )
        return "folder", path
    # 3. a Hub id "owner/name"
    if _HUB_ID_RE.match(name) and ".." not in name:
        return "hub", name
    raise ModelNotFoundError(
        f"Unknown model {name!r}: not a registered name, an existing folder, or a Hub id of the form "
        f"owner/name. Available models: {_local_alternatives(root)}."
    )


def _hub_reachable(timeout: float = 3.0) -> str | None:
    """None when the Hub answers a TCP connect; otherwise the reason it does not."""
    from huggingface_hub import constants  # it reads HF_HUB_OFFLINE and HF_ENDPOINT from the environment

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    endpoint = constants.ENDPOINT
    host = re.sub(r"^https?://", "", endpoint).split("/")[0].split(":")[0]
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return None
    except OSError as exc:
        return f"cannot reach {host} ({exc.__class__.__name__}: {exc})"


def _download_from_hub(repo_id: str, root: Path) -> Path:
    reason = _hub_reachable()
    if reason:
        raise ModelNotFoundError(
            f"Cannot load {repo_id!r} from the Hugging Face Hub: {reason}. "
            f"Use a local model instead: {_local_alternatives(root)}, or a folder saved with save_pretrained."
        )
    from huggingface_hub import list_repo_files, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    try:
        files = list_repo_files(repo_id)
    except RepositoryNotFoundError as exc:
        raise ModelNotFoundError(f"No model {repo_id!r} on the Hugging Face Hub (or it is private).") from exc
    except (HfHubHTTPError, OSError) as exc:
        raise ModelNotFoundError(f"The Hub did not answer for {repo_id!r}: {exc}. "
                                 "Try again or use a local model.") from exc
    if not any(f.endswith(".safetensors") for f in files):
        raise ModelLoadError(
            f"{repo_id!r} has no safetensors weights; pickle checkpoints (.bin) are refused because "
            "loading them can run arbitrary code. Convert it to safetensors first."
        )
    path = snapshot_download(
        repo_id, allow_patterns=["*.json", "*.safetensors", "vocab.txt", "merges.txt", "tokenizer*", "*.model"]
    )
    return Path(path)


def _check_folder(path: Path) -> None:
    has_st = any(path.glob("*.safetensors"))
    if not has_st:
        if any(path.glob("*.bin")) or any(path.glob("*.pt")) or any(path.glob("*.ckpt")):
            raise ModelLoadError(
                f"{path.name!r} holds only pickle weights (.bin/.pt); they are refused because loading "
                "them can run arbitrary code. Re-save the model with save_pretrained(safe_serialization=True)."
            )
        raise ModelLoadError(f"{path.name!r} has no model.safetensors: save the model with save_pretrained().")


def model_folder(name_or_path: str, allow_paths: bool = True, models_dir: Path = DEFAULT_MODELS_DIR) -> Path:
    """The local folder of a model (registered name in ``models_dir``, folder or Hub id, downloaded if
    need be), checked to hold safetensors weights: what a fine-tune starts from. Raises the same clear
    errors as ``load_model``."""
    kind, where = _resolve(name_or_path, allow_paths, models_dir)
    path = _download_from_hub(where, models_dir) if kind == "hub" else Path(where)
    _check_folder(path)
    return path


def load_model(
    name_or_path: str = "default",
    device: str | None = None,
    gpu_dtype: str | None = None,
    allow_paths: bool = True,
    *,
    settings: Settings | None = None,
) -> LoadedModel:
    """Load (or return the cached) model by registered name, local folder or Hub id.

    ``settings`` (default: ``Settings()``, the defaults) gives the models folder registered names
    live in, the device and GPU dtype when ``device``/``gpu_dtype`` are None, and what the analyses
    of this model read (``LoadedModel.settings``: limits, speed options, cpu_int8, memo_size).
    ``device``: "auto" picks cuda > mps > cpu. On CUDA inference runs in bf16 (fp16 where bf16 is
    unsupported) unless ``gpu_dtype`` says otherwise; attributions use an fp32 copy
    (``LoadedModel.fp32_model``). The same model is loaded once per (path, device, dtype, settings).
    ``allow_paths=False`` (the web app, when BERTVIZ_ALLOW_LOCAL_PATHS=0) refuses folder paths.
    """
    settings = settings if settings is not None else Settings()
    dev = resolve_device(device or settings.device)
    dtype = _inference_dtype(dev, gpu_dtype or settings.gpu_dtype)
    kind, where = _resolve(name_or_path, allow_paths, settings.models_dir)
    key = (f"{kind}:{where}", str(dev), str(dtype), settings)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        path = _download_from_hub(where, settings.models_dir) if kind == "hub" else where
        loaded = load_from_folder(str(name_or_path).strip(), kind, Path(path), dev, dtype)
        loaded.settings = settings
        loaded.memo_size = settings.memo_size
        _CACHE[key] = loaded
        return loaded


def clear_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


def cached_models() -> list[LoadedModel]:
    """The models ``load_model`` holds in its cache now."""
    with _CACHE_LOCK:
        return list(_CACHE.values())


def load_from_folder(name: str, kind: str, path: Path, dev: torch.device, dtype: torch.dtype) -> LoadedModel:
    """A model folder loaded on ``dev`` in ``dtype``, uncached and with default settings (``load_model``
    is the cached way in; this one lets a test force a dtype, e.g. bf16 on a CPU)."""
    _check_folder(path)
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"Cannot read the config of {name!r}: {exc}") from exc
    family = family_for_type(config.model_type)
    if family is None:
        raise ModelLoadError(
            f"{name!r} is a {config.model_type!r} model; this tool explains BERT models and their encoder "
            f"relatives: model_type one of {', '.join(SUPPORTED_MODEL_TYPES)} (e.g. bert-base-uncased, "
            f"distilbert-base-uncased, roberta-base or a ...ForSequenceClassification fine-tune of one)."
        )
    # the head its config names (a ...ForTokenClassification checkpoint opens as one); a bare encoder or another
    # task's checkpoint opens as a sequence classifier with a fresh head (``heads.head_for``)
    head = head_for(config.architectures)
    notes: list[str] = []
    if head is None:
        head = SEQUENCE_CLASSIFICATION
        notes.append(FRESH_HEAD_WARNING)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the load report is replaced by our own one-line warning
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = head.auto_class.from_pretrained(
                path,
                config=config,
                dtype=dtype,
                attn_implementation="eager",  # SDPA returns no attention maps
                use_safetensors=True,
                trust_remote_code=False,
            )
            tokenizer = AutoTokenizer.from_pretrained(path, use_fast=True, trust_remote_code=False)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelLoadError(f"Cannot load {name!r}: {exc}") from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    if not tokenizer.is_fast:
        raise ModelLoadError(f"{name!r} has no fast tokenizer (tokenizer.json); offsets for word merging need one.")
    model.to(dev).eval()
    for note in notes:
        log.warning("%s: %s", name, note)
    loaded = LoadedModel(name=name, source=kind, path=path, model=model, tokenizer=tokenizer, device=dev,
                         dtype=dtype, warnings=tuple(notes))
    temperature = load_temperature(path)  # None: no (usable) calibration.json
    if temperature is not None and loaded.multi_label:
        log.warning("%s: calibration.json ignored (temperature scaling applies to single-label models)", name)
    elif temperature is not None:
        loaded.temperature = temperature
    loaded.pairs = trained_on_pairs(path)
    return loaded


def trained_on_pairs(path: str | Path) -> bool | None:
    """Whether the model in folder ``path`` was trained with a second text (sentence pairs): a fine-tuned
    run's run.json says ("pairs", written since runs record it); the default model's build_info.json means
    single reviews (``default_model.build_default`` never trains on pairs). None, unknown, for anything else:
    a Hub model, the bare encoder, an operator's folder, a run recorded before "pairs" was. Unknown says
    nothing (``pair_notice``): a model we know nothing about may well read pairs, and a note on every pair it
    is given would be noise, or wrong."""
    run = load_run_info(Path(path))
    if run is not None:
        return run["pairs"] if isinstance(run.get("pairs"), bool) else None
    if (Path(path) / BUILD_INFO).is_file():
        return False
    return None


def pair_notice(lm: LoadedModel, pair: str | None) -> str | None:
    """A note for a sentence pair given to a model trained on single texts (``LoadedModel.pairs`` False), else
    None (no pair, a model trained on pairs, or one whose training is unknown: ``trained_on_pairs``)."""
    if not (pair and pair.strip()) or lm.pairs is not False:
        return None
    return (f"{lm.name} was trained on single texts, not sentence pairs: the second text was read with the first, "
            "as the model never saw in training, so its answer may mean little. Leave the second text empty, or "
            "use a model fine-tuned with a second text column.")
