"""Keys that name a registry entry are validated from the registries themselves (one source of truth)."""

from operator import attrgetter

import pytest

from siirl.config_checks import check_registry_values, load_config
from siirl.engine.workers.model_loading import DTYPES
from siirl.engine.workers.optim import LR_SCHEDULES
from siirl.engine.workers.parallel_strategy import STRATEGIES
from siirl.errors import ConfigError
from siirl.params import compose_config
from siirl.params.root import SiirlConfig
from siirl.params.rules import field_table
from siirl.registry import governed_keys


@pytest.fixture(scope="module")
def defaults():
    return compose_config(["device=cpu"])


def test_every_governed_key_exists_and_is_not_repeated_in_the_value_tables(defaults):
    check_registry_values(defaults)  # imports every governing family
    governed = governed_keys()
    assert {"actor_rollout_ref.model.dtype", "algorithm.kl_ctrl.type", "critic.strategy", "data.truncation"} <= set(
        governed
    )
    for key in governed:
        attrgetter(key)(defaults)  # every governed key is a field of the typed config
    assert not set(governed) & set(field_table(SiirlConfig, "rule"))


@pytest.mark.parametrize(
    ("override", "registry"),
    [
        ("actor_rollout_ref.actor.strategy=ddp", STRATEGIES),
        ("critic.optim.lr_scheduler_type=warmup_stable", LR_SCHEDULES),
        ("actor_rollout_ref.model.dtype=fp8", DTYPES),
    ],
)
def test_unknown_value_is_one_line_listing_the_registry(override, registry):
    key, value = override.split("=")
    with pytest.raises(ConfigError) as info:
        load_config(["device=cpu", override])
    message = str(info.value)
    assert "\n" not in message and f"{key}={value!r}" in message
    assert f"registered: {', '.join(registry.names())}" in message


def test_unknown_kl_controller_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"algorithm.kl_ctrl.type='pid'.*registered: adaptive, fixed"):
        load_config(["device=cpu", "algorithm.kl_ctrl.type=pid"])


def test_every_name_the_loader_knows_is_accepted():
    assert load_config(["device=cpu", "actor_rollout_ref.model.dtype=bf16"]).actor_rollout_ref.model.dtype == "bf16"
    assert {"bf16", "bfloat16", "fp16", "fp32"} <= set(DTYPES.names())


def test_user_function_passes_where_the_family_is_open():
    ref = "siirl.engine.workers.optim:_cosine"
    cfg = load_config(["device=cpu", f"actor_rollout_ref.actor.optim.lr_scheduler_type={ref}"])
    assert cfg.actor_rollout_ref.actor.optim.lr_scheduler_type == ref
