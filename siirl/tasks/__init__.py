"""Embedded default task and model: synthetic addition data and a tiny SFT-warmed Qwen2.

The default run needs no download: the model, tokenizer and parquet files ship inside the package
under ``siirl/assets`` and are rebuilt by ``python -m siirl.tasks.build_tiny_model``.
"""

from __future__ import annotations

from pathlib import Path

from siirl.errors import SiirlUserError

ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
#: How the embedded policy and task data are rebuilt.
BUILD_POLICY = (
    "python -m siirl.tasks.build_tiny_model --out siirl/assets/tiny_qwen2 --data-out siirl/assets/data/arith"
)


def default_model_path() -> str:
    """Directory of the embedded tiny model + tokenizer (loadable with ``from_pretrained``)."""
    return str(_existing(ASSETS_DIR / "tiny_qwen2"))


def default_reward_model_path() -> str:
    """Directory of the embedded tiny reward model (a sequence classifier of ``a+b=`` answers)."""
    return str(_existing(ASSETS_DIR / "tiny_reward_model", "python -m siirl.tasks.build_tiny_reward_model"))


def default_data_files() -> tuple[str, str]:
    """(train, val) parquet paths of the embedded addition task."""
    data = ASSETS_DIR / "data" / "arith"
    return str(_existing(data / "train.parquet")), str(_existing(data / "val.parquet"))


def _existing(path: Path, rebuild: str = BUILD_POLICY) -> Path:
    if not path.exists():
        raise SiirlUserError(f"embedded asset missing: {path}; rebuild with `{rebuild}`")
    return path
