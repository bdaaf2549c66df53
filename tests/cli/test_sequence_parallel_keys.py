"""verl's ``ulysses_sequence_parallel_size``: accepted sizes plan sp groups; every size that cannot run is ONE
line, exit 2, before Ray starts."""

import pytest
from cli_testutils import one_line_refusal

from siirl.main_dag import prepare

ACTOR = "actor_rollout_ref.actor.ulysses_sequence_parallel_size"
REF = "actor_rollout_ref.ref.ulysses_sequence_parallel_size"
CRITIC = "critic.ulysses_sequence_parallel_size"


def test_the_reference_follows_the_actor_and_the_plan_shares_data_over_sp_groups():
    plan = prepare(["device=cpu", f"{ACTOR}=2", "critic.enable=true", f"{CRITIC}=2"])[3]
    for role in ("actor", "reference", "critic"):
        groups = plan.groups[role]
        assert (groups.model_parallel, groups.tp_groups, groups.dp_size) == ("sp", [(0, 1)], 1), role
    assert plan.groups["rollout"].dp_size == 2  # the rollout still splits the prompts
    assert str(plan.worker(1).coords["actor"]) == "dp0/1 sp1/2"
    assert prepare(["device=cpu", f"{ACTOR}=2", f"{REF}=1"])[3].groups["reference"].model_parallel == "tp"


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ([f"{ACTOR}=0"], [f"{ACTOR}=0", "positive integer"]),
        ([f"{ACTOR}=4"], [f"{ACTOR}=4", "job's 2 devices"]),
        ([f"{CRITIC}=3", "critic.enable=true"], [f"{CRITIC}=3", "job's 2 devices"]),
        ([f"{ACTOR}=2", "actor_rollout_ref.model.use_remove_padding=false"], ["use_remove_padding=true", "packed"]),
        ([f"{ACTOR}=2", "actor_rollout_ref.model.remove_padding_layout=shared"], ["remove_padding_layout=shared"]),
        ([f"{ACTOR}=2", "actor_rollout_ref.actor.use_prefix_grouper=true"], ["use_prefix_grouper", "do not combine"]),
        ([f"{ACTOR}=2", f"{REF}=1", "actor_rollout_ref.model.lora_rank=8"], ["under LoRA", f"{REF}=1 must equal"]),
        ([f"{REF}=8", "trainer.n_gpus_per_node=8"], [f"{REF}=8", "4 attention heads"]),
        (["task=digits", f"{ACTOR}=2"], ["vision-language", "ulysses_sequence_parallel_size"]),
    ],
)
def test_sizes_that_cannot_run_are_one_line(capsys, overrides, names):
    err = one_line_refusal(capsys, "--plan", "device=cpu", *overrides)
    assert all(name in err for name in names), err
