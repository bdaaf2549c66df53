"""verl's actor/rollout/model keys: every unknown key in one error with a suggestion, verl spellings renamed
or refused with the reason, enum values matched without case, rollout lengths checked; all before Ray."""

from __future__ import annotations

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.main_dag import EXIT_USER_ERROR, main
from siirl.params.override_screen import closest_key
from siirl.params.root import SiirlConfig
from siirl.params.schema_keys import schema_keys
from tests.ray_testutils import ray_start_attempts


def _error(capsys, *overrides: str) -> list[str]:
    with ray_start_attempts() as ray_starts:
        code = main(["--print-config", "device=cpu", *overrides])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and err.startswith("siirl: error:") and "Traceback" not in err, err
    assert not ray_starts
    return err.splitlines()


def test_three_unknown_keys_in_one_error_with_suggestions(capsys):
    lines = _error(capsys, "actor_rollout_ref.actor.ppo_mini_batchsize=2", "trainer.nnode=1",
                   "+actor_rollout_ref.rollout.gpu_mem_utilization=0.5", "actor_rollout_ref.rollout.n=2")
    assert lines[0] == "siirl: error: bad config: 3 overrides cannot be applied:"
    assert lines[1:] == [
        ("  unknown key actor_rollout_ref.actor.ppo_mini_batchsize (did you mean "
        "actor_rollout_ref.actor.ppo_mini_batch_size?)"),
        "  unknown key trainer.nnode (did you mean trainer.nnodes?)",
        ("  unknown key actor_rollout_ref.rollout.gpu_mem_utilization (did you mean "
        "actor_rollout_ref.rollout.gpu_memory_utilization?)"),
    ]


def test_suggestion_finds_a_leaf_at_another_depth():
    known = schema_keys(SiirlConfig).leaves | {"actor_rollout_ref.ref.fsdp_config.param_offload"}
    known -= {"actor_rollout_ref.ref.param_offload"}
    wanted = "actor_rollout_ref.ref.fsdp_config.param_offload"
    assert closest_key("actor_rollout_ref.ref.param_offload", known) == wanted
    assert closest_key("zzz.qqq", known) is None


def test_one_problem_is_one_line(capsys):
    (line,) = _error(capsys, "trainer.bogus=1")
    assert line == "siirl: error: bad config: unknown key trainer.bogus"


def test_plus_on_a_known_key_sets_it():
    assert load_config(["+actor_rollout_ref.rollout.n=3"]).actor_rollout_ref.rollout.n == 3


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2", "Megatron-LM"),
        ("actor_rollout_ref.actor.ulysses_sequence_parallel_size=4", "must divide the job's 2 devices"),
        ("critic.ulysses_sequence_parallel_size=4", "must divide the job's 2 devices"),
        ("actor_rollout_ref.ref.ulysses_sequence_parallel_size=0", "must be a positive integer"),
        ("actor_rollout_ref.rollout.mode=server", "expected one of sync, async"),
        ("actor_rollout_ref.model.fused_kernel_options.impl_backend=cuda", "torch, triton"),
        ("actor_rollout_ref.rollout.response_length=64", "data.max_response_length"),
        ("actor_rollout_ref.rollout.prompt_length=2", "data.max_prompt_length"),
    ],
)
def test_unsupported_values_are_named(capsys, override, needle):
    (line,) = _error(capsys, override)
    assert needle in line, line


def test_off_values_and_renamed_keys_are_accepted():
    cfg = load_config([
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1", "critic.ulysses_sequence_parallel_size=1",
        "actor_rollout_ref.actor.use_torch_compile=False", "actor_rollout_ref.hybrid_engine=True",
        "actor_rollout_ref.model.torch_dtype=float32", "actor_rollout_ref.actor.optim.clip_grad=0.5",
        "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=64",
        "actor_rollout_ref.actor.use_cpgd_loss=True", "algorithm.adv_estimator=cpgd", "critic.use_critic_model=False",
        "actor_rollout_ref.rollout.calculate_log_probs=False", "actor_rollout_ref.rollout.mode=sync",
        "actor_rollout_ref.model.use_fused_kernels=False",
        "actor_rollout_ref.model.fused_kernel_options.impl_backend=triton",
    ])
    arr = cfg.actor_rollout_ref
    assert arr.model.dtype == "float32" and arr.actor.grad_clip == 0.5 and arr.rollout.weight_sync_bucket_mb == 64
    assert arr.actor.policy_loss.loss_mode == "cpgd" and cfg.critic.enable is False
    assert arr.model.use_fused_kernels is False and arr.model.fused_kernel_options.impl_backend == "triton"


def test_enum_values_are_case_insensitive():
    cfg = load_config(["algorithm.adv_estimator=GRPO", "actor_rollout_ref.actor.loss_agg_mode=Seq-Mean-Token-Mean",
                       "critic.loss_agg_mode=TOKEN-MEAN", "actor_rollout_ref.rollout.name=HF",
                       "actor_rollout_ref.actor.kl_loss_type=Low_Var_KL", "actor_rollout_ref.actor.strategy=FSDP2"])
    arr = cfg.actor_rollout_ref
    assert (cfg.algorithm.adv_estimator, arr.actor.loss_agg_mode, cfg.critic.loss_agg_mode) == (
        "grpo", "seq-mean-token-mean", "token-mean")
    assert (arr.rollout.name, arr.actor.kl_loss_type, arr.actor.strategy) == ("hf", "low_var_kl", "fsdp2")
    with pytest.raises(ConfigError, match="adv_estimator='GRPPO'"):
        load_config(["algorithm.adv_estimator=GRPPO"])


def test_rollout_lengths_default_to_the_data_and_are_honoured():
    rollout = load_config(["data.max_prompt_length=16", "data.max_response_length=8"]).actor_rollout_ref.rollout
    assert (rollout.prompt_length, rollout.response_length) == (16, 8)
    rollout = load_config(["data.max_response_length=8", "actor_rollout_ref.rollout.response_length=4",
                           "actor_rollout_ref.rollout.prompt_length=40"]).actor_rollout_ref.rollout
    assert (rollout.prompt_length, rollout.response_length) == (40, 4)


def test_sglang_tensor_parallel_is_refused_before_ray(fake_cuda):
    with pytest.raises(ConfigError, match="rollout.name=sglang runs one engine per device"):
        load_config(["device=cuda", "actor_rollout_ref.rollout.name=sglang",
                     "actor_rollout_ref.rollout.tensor_model_parallel_size=2"])


def test_speed_and_serving_knobs_are_accepted_at_any_value(caplog):
    """They leave the results as they are here (docs/migrating-from-verl.md says what siiRL does instead)."""
    import logging

    with caplog.at_level(logging.WARNING):
        cfg = load_config([
            "actor_rollout_ref.actor.use_torch_compile=True", "actor_rollout_ref.ref.use_torch_compile=True",
            "actor_rollout_ref.actor.entropy_checkpointing=True", "reward_model.use_reward_loop=True",
            "reward_model.rollout.name=vllm", "actor_rollout_ref.nccl_timeout=1200", "actor_rollout_ref.rollout.mode=async",
        ])
    assert cfg.actor_rollout_ref.rollout.mode == "async"
    # verl's default rollout mode is async; the schedule is trainer.v1.trainer_mode, so it is accepted silently
    assert sum("rollout.mode=async" in r.getMessage() for r in caplog.records) == 0


@pytest.mark.parametrize("engine", [["device=cpu"], ["device=cuda", "actor_rollout_ref.rollout.name=vllm"],
                                    ["device=npu", "actor_rollout_ref.rollout.name=vllm"]])
def test_calculate_log_probs_on_the_engines_that_record_them(engine):
    """hf records while sampling; vLLM (and vLLM-Ascend, the same ``LLM``) returns them with the samples."""
    cfg = load_config([*engine, "actor_rollout_ref.rollout.calculate_log_probs=True"])
    assert cfg.actor_rollout_ref.rollout.calculate_log_probs
    assert cfg.actor_rollout_ref.actor.old_log_prob_source == ("rollout" if engine == ["device=cpu"] else "recompute")


def test_calculate_log_probs_is_refused_on_an_engine_that_records_none():
    with pytest.raises(ConfigError, match="'sglang' rollout engine does not record") as info:
        load_config(["device=cuda", "actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.rollout.calculate_log_probs=True"])
    assert "\n" not in str(info.value)


def test_rollout_probs_diff_is_verls_metric():
    import torch

    from siirl.dag_worker.builtin_nodes import rollout_probs_diff

    rollout = torch.log(torch.tensor([[0.5, 0.2, 1.0]]))
    actor = torch.log(torch.tensor([[0.4, 0.2, 0.1]]))
    got = rollout_probs_diff(rollout, actor, torch.tensor([[True, True, False]]))
    assert abs(got["training/rollout_probs_diff_max"] - 0.1) < 1e-6
    assert abs(got["training/rollout_probs_diff_mean"] - 0.05) < 1e-6
