"""verl's LoRA keys: accepted as verl writes them, typed here, and every bad value ONE line before Ray."""

import pytest
import torch
from cli_testutils import one_line_refusal
from launch_scripts import replays, write_task_data
from peft import get_peft_model_state_dict
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from siirl.config_checks import load_config
from siirl.engine.workers.lora import ADAPTER_WEIGHTS, apply_lora, configured_rank
from siirl.errors import ConfigError
from siirl.main_dag import EXIT_USER_ERROR, main

LORA = "actor_rollout_ref.model.lora_rank=8"


def _refusal(capsys, tmp_path, *overrides: str) -> str:
    # vLLM is a GPU engine: on device=cpu the run would roll out with hf and never reach vLLM's checks
    device = "device=cuda" if "actor_rollout_ref.rollout.name=vllm" in overrides else "device=cpu"
    return one_line_refusal(capsys, "--plan", device, f"trainer.output_dir={tmp_path}", *overrides)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["actor_rollout_ref.model.lora_rank=-4"], "lora_rank=-4 is invalid; expected >= 0"),
        ([LORA, "actor_rollout_ref.model.lora_alpha=0"], "lora_alpha=0 is invalid"),
        ([LORA, "actor_rollout_ref.model.target_modules=[q_proj,qkv_proj]"], "qkv_proj match no module"),
        ([LORA, "actor_rollout_ref.model.target_modules=[]"], "must be a non-empty list"),
        ([LORA, "actor_rollout_ref.model.target_modules=[all-linear,q_proj]"], "all-linear stands alone"),
        ([LORA, "actor_rollout_ref.model.lora_adapter_path=/no/such/adapter"], "holds no adapter_config.json"),
        (["actor_rollout_ref.rollout.load_format=hf"], "load_format='hf' is invalid"),
        ([LORA, "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.load_format=dummy"],
         "would leave its base weights random"),
    ],
)
def test_bad_lora_values_are_one_line(capsys, tmp_path, overrides, expected):
    assert expected in _refusal(capsys, tmp_path, *overrides)


def test_verl_lora_script_keys_load():
    cfg = load_config([
        "device=cpu", "actor_rollout_ref.model.lora_rank=64", "actor_rollout_ref.model.lora_alpha=32",
        "actor_rollout_ref.model.target_modules=all-linear", "actor_rollout_ref.model.use_shm=True",
        "actor_rollout_ref.rollout.load_format=safetensors", "actor_rollout_ref.rollout.layered_summon=True",
        "actor_rollout_ref.actor.use_kl_loss=true",
    ])
    model = cfg.actor_rollout_ref.model
    assert (model.lora_rank, model.lora_alpha, model.target_modules, model.use_shm) == (64, 32, "all-linear", True)
    # the engine runs merged weights, so the rollout's log-probs are not exact: the actor recomputes them
    assert cfg.actor_rollout_ref.actor.old_log_prob_source == "recompute"
    assert load_config(["device=cpu"]).actor_rollout_ref.actor.old_log_prob_source == "rollout"


def test_critic_takes_no_lora_keys(capsys):
    assert main(["--print-config", "device=cpu", "critic.model.lora_rank=8"]) == EXIT_USER_ERROR
    assert "lora_rank" in capsys.readouterr().err


def test_verl_script_from_a_saved_adapter_starts_from_its_weights(tmp_path):
    """verl's ``run_qwen2_5-3b_gsm8k_grpo_lora_from_adapter``: its placeholder adapter path is swapped for an
    adapter saved for the embedded model; the script plans, and the policy it builds holds that adapter's
    weights (not fresh ones, whose lora_B would be zero)."""
    name = "verl/examples/grpo_trainer/run_qwen2_5-3b_gsm8k_grpo_lora_from_adapter"
    (replay,) = replays(name, tmp_path, write_task_data(tmp_path / "data"), [f"trainer.output_dir={tmp_path / 'out'}"])
    cfg = load_config(replay.overrides)
    model_cfg = cfg.actor_rollout_ref.model
    assert model_cfg.lora_adapter_path == str(tmp_path / "lora_adapter") and configured_rank(model_cfg) == 8
    saved = load_file(tmp_path / "lora_adapter" / ADAPTER_WEIGHTS)
    policy = apply_lora(AutoModelForCausalLM.from_pretrained(model_cfg.path, dtype=torch.float32), model_cfg)
    loaded = get_peft_model_state_dict(policy)
    assert set(loaded) == set(saved) and any(".lora_B." in key for key in saved)
    for key, tensor in saved.items():
        torch.testing.assert_close(loaded[key], tensor, atol=0, rtol=0)


class _Rollout:
    """An engine that serves adapters unless its LoRA is off, as vLLM's (``takes_lora_adapters``)."""

    def __init__(self, takes_lora_adapters: bool):
        self.takes_lora_adapters, self.synced = takes_lora_adapters, []

    def wake_up(self):
        pass

    def sync_lora_adapter(self, config, tensors):
        self.synced.append("adapter")

    def sync_weights(self, named):
        self.synced.append("merged")


class _LoraActor:
    lora = True

    def lora_adapter(self):
        return None, {}

    def named_parameters_for_sync(self):
        return iter(())


@pytest.mark.parametrize(("merge", "synced"), [("False", "adapter"), ("True", "merged")])
def test_lora_merge_sends_merged_weights_to_an_engine_that_serves_adapters(merge, synced):
    """verl's ``model.lora.merge``: the engine is built without LoRA (vLLM's ``enable_lora`` off, as its
    ``takes_lora_adapters`` follows ``serves_adapters``) and each sync sends the merged weights."""
    from siirl.dag_worker.policy import Policy
    from siirl.params.lora import serves_adapters

    cfg = load_config(["device=cpu", "actor_rollout_ref.model.lora_rank=8", f"+actor_rollout_ref.model.lora.merge={merge}"])
    model = cfg.actor_rollout_ref.model
    assert model.lora.merge is (merge == "True")
    rollout = _Rollout(takes_lora_adapters=serves_adapters(model))
    Policy(actor=_LoraActor(), rollout=rollout, kl_ctrl=None).refresh()
    assert rollout.synced == [synced]


def test_lora_merge_lets_the_engine_start_from_dummy_weights():
    """Served adapters need real base weights in the engine (load_format=dummy refused); merged syncs send
    every weight, so verl's dummy start is fine again."""
    from siirl.engine.rollout.choice import check_lora_rollout

    def on_vllm(*overrides):  # the CPU rolls out with hf; the check is the GPU host's
        cfg = load_config(["device=cpu", "actor_rollout_ref.model.lora_rank=8",
                           "actor_rollout_ref.rollout.load_format=dummy", *overrides])
        cfg.actor_rollout_ref.rollout.name = "vllm"
        return cfg

    with pytest.raises(ConfigError, match="load_format=dummy with LoRA"):
        check_lora_rollout(on_vllm())
    check_lora_rollout(on_vllm("actor_rollout_ref.model.lora.merge=true"))
