"""verl's ``actor_rollout_ref.actor.checkpoint`` section: what a checkpoint holds and what a resume reads.

siiRL checkpoints a step whole (model and optimizer shards, trainer state) whatever ``save_contents``
lists, since a resume needs all three; ``hf_model`` (save only, as in verl) adds a Hugging Face model folder,
``<step>/actor/huggingface/``, that ``from_pretrained`` loads: an export beside the resume files. A resume
reads the whole step, so an explicit ``load_contents`` must list it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from siirl.errors import ConfigError

#: What every siiRL checkpoint holds and every resume reads.
WHOLE_STEP = ("model", "optimizer", "extra")
#: What ``save_contents`` may add.
EXPORTS = ("hf_model",)


@dataclass
class CheckpointContentsConfig:
    save_contents: list[str] = field(default_factory=lambda: list(WHOLE_STEP))
    #: null = save_contents (verl's ``${.save_contents}``); hf_model in it is not read (verl reads none either).
    load_contents: Optional[list[str]] = None  # noqa: UP045 - OmegaConf reads Optional

    def validate(self, cfg: Any, key: str) -> None:
        """Only known contents; an explicit ``load_contents`` reads the whole step. One line otherwise."""
        unknown = sorted(set(self.save_contents) - set(WHOLE_STEP) - set(EXPORTS))
        if unknown:
            raise ConfigError(
                f"bad config: {key}.save_contents names unknown contents {', '.join(unknown)}; "
                f"expected some of {', '.join(WHOLE_STEP + EXPORTS)}"
            )
        loaded = WHOLE_STEP if self.load_contents is None else self.load_contents
        missing = [item for item in WHOLE_STEP if item not in loaded]
        if missing:
            raise ConfigError(
                f"bad config: {key}.load_contents={list(self.load_contents)} lacks {', '.join(missing)}: "
                f"a resume here reads the whole step ({', '.join(WHOLE_STEP)})"
            )


def saves_hf_model(actor_cfg) -> bool:
    return "hf_model" in actor_cfg.checkpoint.save_contents
