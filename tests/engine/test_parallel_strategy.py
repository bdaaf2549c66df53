"""The model-spreading policy: auto picks replication for small models, FSDP for big or offloaded ones."""

import pytest

from siirl.engine.workers.parallel_strategy import REPLICATE_MAX_PARAMS, STRATEGIES, choose_strategy
from siirl.errors import ConfigError


@pytest.mark.parametrize(
    ("requested", "params", "dp", "offload", "chosen"),
    [
        ("auto", 625_000, 2, False, "replicate"),
        ("auto", REPLICATE_MAX_PARAMS, 8, False, "replicate"),
        ("auto", REPLICATE_MAX_PARAMS + 1, 8, False, "fsdp"),
        ("auto", 7_000_000_000, 1, False, "replicate"),  # one rank: nothing to shard over
        ("auto", 625_000, 2, True, "fsdp"),  # parameter offload is an FSDP feature
        ("fsdp2", 625_000, 2, False, "fsdp"),
        ("fsdp", 625_000, 2, False, "fsdp"),
        ("replicate", 7_000_000_000, 8, False, "replicate"),
    ],
)
def test_choice(requested, params, dp, offload, chosen):
    assert choose_strategy(requested, params, dp, offload) == chosen
    assert chosen in STRATEGIES


def test_unknown_strategy_names_the_choices():
    with pytest.raises(ConfigError, match="fsdp, fsdp2, replicate.*also allowed: auto"):
        choose_strategy("megatron", 1, 1, False)
