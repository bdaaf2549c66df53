"""Where the embedded assets are: the tiny models, tokenizers and task parquet files shipped under
``siirl/assets``, which the default run trains on without a download. The builders that make them are
``siirl.tasks``; the config loader (siirl.params) reads these paths, so this module sits below both."""

from __future__ import annotations

from pathlib import Path

from siirl.errors import SiirlUserError

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
#: How the embedded policy and task data are rebuilt.
BUILD_POLICY = (
    "python -m siirl.tasks.build_tiny_model --out siirl/assets/tiny_qwen2 --data-out siirl/assets/data/arith"
)

#: How the embedded VLM and its image task data are rebuilt.
BUILD_VLM = "python -m siirl.tasks.build_tiny_vlm --out siirl/assets/tiny_qwen2_vl --data-out siirl/assets/data/digits"


def default_model_path() -> str:
    """Directory of the embedded tiny model + tokenizer (loadable with ``from_pretrained``)."""
    return str(_existing(ASSETS_DIR / "tiny_qwen2"))


def default_reward_model_path() -> str:
    """Directory of the embedded tiny reward model (a sequence classifier of ``a+b=`` answers)."""
    return str(_existing(ASSETS_DIR / "tiny_reward_model", "python -m siirl.tasks.build_tiny_reward_model"))


def default_data_files() -> tuple[str, str]:
    """(train, val) parquet paths of the embedded addition task."""
    return _split_files("arith", BUILD_POLICY)


def default_vlm_model_path() -> str:
    """Directory of the embedded tiny Qwen2-VL with its tokenizer and image processor (loadable with
    ``AutoModelForImageTextToText``, ``AutoTokenizer`` and ``AutoImageProcessor``)."""
    return str(_existing(ASSETS_DIR / "tiny_qwen2_vl", BUILD_VLM))


def default_vlm_data_files() -> tuple[str, str]:
    """(train, val) parquet paths of the embedded digit-image task (verl's multimodal format)."""
    return _split_files("digits", BUILD_VLM)


def asset_path(relative: str) -> str:
    """A file or folder shipped under ``siirl/assets``; YAML presets name it ``${siirl_asset:<relative>}``
    (``configs/task/digits.yaml``), since a package-relative path cannot be written in YAML."""
    path = ASSETS_DIR / relative
    if not path.exists():
        raise SiirlUserError(f"embedded asset missing: {path}; rebuild it as siirl/assets/README.md says")
    return str(path)


def _split_files(task: str, rebuild: str) -> tuple[str, str]:
    data = ASSETS_DIR / "data" / task
    return str(_existing(data / "train.parquet", rebuild)), str(_existing(data / "val.parquet", rebuild))


def _existing(path: Path, rebuild: str = BUILD_POLICY) -> Path:
    if not path.exists():
        raise SiirlUserError(f"embedded asset missing: {path}; rebuild with `{rebuild}`")
    return path
