"""One key picks the weight-sync transport (``actor_rollout_ref.rollout.weight_sync``, verl's
``checkpoint_engine.backend`` renamed onto it), resolved per trainer mode before Ray; every transport the
device layer ships is reachable, and what a layout cannot use is one line."""

import pytest

from siirl.config_checks import load_config
from siirl.device.weight_sync import WEIGHT_SYNC_BACKENDS
from siirl.errors import ConfigError
from siirl.weight_transport import MODE_TRANSPORTS

VERL = "actor_rollout_ref.rollout.checkpoint_engine.backend="
SEPARATE = ["trainer.v1.trainer_mode=separate_async"]
COLOCATE = ["trainer.v1.trainer_mode=colocate_async"]


RESOLVED = [
        ([], "in_place"),
        ([f"{VERL}naive"], "in_place"),  # verl's default everywhere: the layout's own transport
        ([*COLOCATE], "object_store"),
        ([*COLOCATE, f"{VERL}ray"], "object_store"),
        ([*SEPARATE], "broadcast"),
        ([*SEPARATE, f"{VERL}naive"], "broadcast"),
        ([*SEPARATE, f"{VERL}nccl"], "broadcast"),
        ([*SEPARATE, f"{VERL}hccl"], "broadcast"),
        ([*SEPARATE, "actor_rollout_ref.rollout.weight_sync=gloo"], "broadcast"),
        # the engine's own processes join the broadcast: SGLang's schedulers, vLLM's engine core on a rollout rank
        ([*SEPARATE, "device=cuda", "actor_rollout_ref.rollout.name=sglang", f"{VERL}engine_broadcast"],
         "engine_broadcast"),
        ([*SEPARATE, "device=cuda", "actor_rollout_ref.rollout.name=vllm", f"{VERL}engine_broadcast"],
         "engine_broadcast"),
]


@pytest.mark.parametrize(("overrides", "transport"), RESOLVED)
def test_the_key_resolves_to_a_transport_of_the_layout(overrides, transport):
    assert load_config(overrides).actor_rollout_ref.rollout.weight_sync == transport


def test_every_shipped_transport_is_some_configs_choice():
    shipped = {name for name, cls in WEIGHT_SYNC_BACKENDS.items()
               if next(n for n, c in WEIGHT_SYNC_BACKENDS.items() if c is cls) == name}
    assert shipped == {t for transports in MODE_TRANSPORTS.values() for t in transports}
    assert shipped == {transport for _, transport in RESOLVED}  # each one reached by a config above


def test_the_bucket_size_is_verls_update_weights_bucket_megabytes():
    cfg = load_config([*SEPARATE, "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=64"])
    assert cfg.actor_rollout_ref.rollout.weight_sync_bucket_mb == 64


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ([f"{VERL}nccl"], "does not fit trainer.v1.trainer_mode=sync, whose layout moves weights by in_place"),
        ([*SEPARATE, "actor_rollout_ref.rollout.weight_sync=in_place"], "whose layout moves weights by broadcast"),
        ([*SEPARATE, f"{VERL}engine_broadcast"], "needs a rollout engine whose processes join the broadcast"),
        ([*SEPARATE, f"{VERL}nixl"], "moves weights through NIXL, which siiRL does not ship"),
        ([*SEPARATE, f"{VERL}mooncake"], "the Mooncake transfer engine, which siiRL does not ship"),
        ([f"{VERL}bogus"], "unknown weight-sync backend 'bogus'"),
    ],
)
def test_what_a_layout_cannot_use_is_one_line(overrides, needle):
    with pytest.raises(ConfigError) as raised:
        load_config(overrides)
    assert needle in str(raised.value) and "\n" not in str(raised.value)
