"""Keys verl moved, at their new place, renamed onto the siiRL key that keeps the old one (merged into
``siirl.params.verl_inert_keys.RENAMED``). A renamed key is screened again where it lands, so a move onto a
key verl had already renamed, or onto a key with a status, ends where the old spelling ends.

Both generations work; each entry says how much newer its spelling is, and where a script or a YAML tree sets
two spellings of one key to different values the newest wins, with one warning.
"""

from __future__ import annotations

from siirl.params.verl_key_kinds import Renamed

MOVED: dict[str, Renamed] = {
    # verl's reward section (February 2026): reward.* replaces reward_model.* and custom_reward_function.*
    "reward.reward_model.*": Renamed("reward_model.*", newer=1),
    "reward.num_workers": Renamed("reward_model.num_workers", newer=1),
    "reward.reward_manager.name": Renamed("reward_model.reward_manager.name", newer=1),
    "reward.reward_manager.*": Renamed("reward_manager.*", newer=1),  # source, module.*: the older tree's keys
    "reward.custom_reward_function.*": Renamed("custom_reward_function.*", newer=1),
    "reward.reward_kwargs.*": Renamed("reward_model.reward_kwargs.*", newer=1),
    "reward.sandbox_fusion.*": Renamed("reward_model.sandbox_fusion.*", newer=1),
    # the weeks between (verl's reward_model section before the move)
    "reward_model.model_path": Renamed("reward_model.model.path", newer=1),
    "reward_model.reward_manager.name": Renamed("reward_model.reward_manager", newer=1),
    # verl's critic engine section (April 2026)
    "critic.fsdp.*": Renamed("critic.model.fsdp_config.*", newer=1),
}
