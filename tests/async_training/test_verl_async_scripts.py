"""verl's published asynchronous launches plan unchanged through ``siirl.main_dag``'s pre-Ray path.

The overrides are verl's ``tests/special_e2e/run_v1_separate_async.sh`` (commit 1dda039, its fsdp2 branch)
with the script's defaults substituted (NUM_GPUS=8: 4 training + 4 rollout GPUs, rollout TP 2,
PARAMETER_SYNC_STEP=4, PPO_MINI_BATCH_SIZE=1, 2 steps), then ``device=cpu`` and the embedded model and data
in place of the script's Qwen2.5 and GSM8K paths (as every launch-script replay here does). Its vLLM rollout is
refused in one line (vLLM's in-process engine cannot roll out on ranks of its own), so the replays name the hf
engine (``HF``). ``transfer_queue.enable`` is accepted (siiRL's data coordinator is that queue) and
``checkpoint_engine.backend=nccl`` selects the broadcast transport (gloo on the CPU); FSDP hybrid sharding
(``fsdp_size=2``: 2 of the 4 trainer GPUs) is the one key still refused. tests/e2e/test_verl_v1_async.py
trains the same overrides at the CPU's size.
"""

import pytest

from siirl.errors import ConfigError
from siirl.main_dag import prepare
from siirl.params.async_training import async_schedule

REFUSED = ["actor_rollout_ref.actor.fsdp_config.fsdp_size=2"]
#: The one change besides the device counts: separate_async rolls out with hf (vLLM is refused there).
HF = ["actor_rollout_ref.rollout.name=hf", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]

V1_SEPARATE_ASYNC = [
    "trainer.use_v1=True", "trainer.v1.trainer_mode=separate_async",
    "trainer.v1.separate_async.num_warmup_batches=1", "trainer.v1.separate_async.parameter_sync_step=4",
    "trainer.v1.sampler.max_off_policy_threshold=8", "trainer.v1.sampler.max_off_policy_strategy=drop",
    "transfer_queue.enable=True", "data.prompt_key=prompt", "data.truncation=left",
    "data.filter_overlong_prompts=True", "data.return_raw_chat=True", "data.max_prompt_length=512",
    "data.max_response_length=512", "data.train_batch_size=4", "data.gen_batch_size=1",
    "algorithm.adv_estimator=grpo", "algorithm.use_kl_in_reward=False", "algorithm.rollout_correction.bypass_mode=False",
    "actor_rollout_ref.model.use_remove_padding=True", "actor_rollout_ref.model.enable_gradient_checkpointing=True",
    "actor_rollout_ref.actor.optim.lr=1e-6", "actor_rollout_ref.actor.optim.lr_warmup_steps=-1",
    "actor_rollout_ref.actor.ppo_mini_batch_size=1", "actor_rollout_ref.actor.ppo_epochs=1",
    "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096",
    "actor_rollout_ref.actor.use_kl_loss=False", "actor_rollout_ref.actor.entropy_coeff=0",
    "actor_rollout_ref.actor.clip_ratio_low=0.2", "actor_rollout_ref.actor.clip_ratio_high=0.28",
    "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.mode=async",
    "actor_rollout_ref.rollout.nnodes=1", "actor_rollout_ref.rollout.n_gpus_per_node=4",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=2", "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
    "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.rollout.calculate_log_probs=True",
    "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=4096",
    "actor_rollout_ref.rollout.enable_chunked_prefill=True", "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl",
    "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=1024",
    "reward.reward_manager.name=dapo", "trainer.logger=[console]", "trainer.project_name=verl-test-v1-separate-async",
    "trainer.experiment_name=qwen2_5-0_5b-v1-separate-async-fsdp2", "trainer.val_before_train=False",
    "trainer.test_freq=-1", "trainer.save_freq=-1", "trainer.resume_mode=disable", "trainer.nnodes=1",
    "trainer.n_gpus_per_node=4", "trainer.total_epochs=1", "trainer.total_training_steps=2",
    "actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.actor.fsdp_config.fsdp_size=2",
    "actor_rollout_ref.actor.fsdp_config.param_offload=False", "actor_rollout_ref.actor.fsdp_config.optimizer_offload=False",
]


def test_verl_v1_separate_async_script_plans_rollout_and_trainers_apart():
    """With the hf engine: its vLLM at tensor_model_parallel_size=2 cannot roll out on ranks of their own, where
    each rank runs its own engine on its one device (refused in one line)."""
    script = [o for o in V1_SEPARATE_ASYNC if o not in REFUSED]
    with pytest.raises(ConfigError, match="tensor_model_parallel_size=2 with trainer.v1.trainer_mode=separate_async"):
        prepare(["device=cpu", *script])
    cfg, _, _, plan = prepare(["device=cpu", *script, *HF])
    schedule = plan.resolved.schedule
    assert schedule == async_schedule(cfg)  # resolved once, carried by the plan
    assert (schedule.mode, schedule.max_lag) == ("separate_async", 8)  # V1's max_off_policy_threshold
    # verl's streaming unit gen_batch_size=1 is left as given; the producer draws a train batch per step
    assert (cfg.data.gen_batch_size, plan.resolved.prompts_per_draw) == (1, 4)
    assert (plan.nnodes, plan.world_size) == (2, 8)
    assert plan.placements["rollout"] == (0, 1, 2, 3) and plan.placements["trainer"] == (4, 5, 6, 7)
    assert plan.groups["trainer/actor"].dp_size == 4 and plan.groups["rollout/rollout"].ranks == (0, 1, 2, 3)
    assert [h.producer_role for h in plan.handoffs] == ["rollout/rollout"]


def test_the_scripts_transport_and_transfer_queue_resolve_and_hybrid_sharding_is_refused():
    cfg, *_ = prepare(["device=cpu", *(o for o in V1_SEPARATE_ASYNC if o not in REFUSED), *HF])
    rollout = cfg.actor_rollout_ref.rollout
    assert (rollout.weight_sync, rollout.weight_sync_bucket_mb) == ("broadcast", 1024)
    with pytest.raises(ConfigError, match="fsdp_size=2 asks for hybrid sharding"):
        prepare(["device=cpu", *V1_SEPARATE_ASYNC, *HF])
