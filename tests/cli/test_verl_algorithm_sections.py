"""verl's algorithm.pf_ppo and algorithm.rollout_correction keys: loaded, planned into the graph, and every
bad value refused in one line before Ray."""

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.main_dag import prepare

PF_PPO = ["algorithm.adv_estimator=gae", "algorithm.use_pf_ppo=True", "algorithm.pf_ppo.reweight_method=max_min",
          "algorithm.pf_ppo.weight_pow=3.0"]
CORRECTION = [
    "actor_rollout_ref.rollout.calculate_log_probs=True",
    "algorithm.rollout_correction.rollout_is=sequence", "algorithm.rollout_correction.rollout_is_threshold=2.0",
    "algorithm.rollout_correction.rollout_is_batch_normalize=true", "algorithm.rollout_correction.rollout_rs=geometric",
    "algorithm.rollout_correction.rollout_rs_threshold=1.01", "algorithm.rollout_correction.rollout_rs_threshold_lower=0.99",
    "algorithm.rollout_correction.rollout_token_veto_threshold=1e-4",
]


def test_pf_ppo_keys_load():
    cfg = load_config(PF_PPO)
    assert cfg.algorithm.use_pf_ppo and cfg.algorithm.pf_ppo.reweight_method == "max_min"
    assert cfg.algorithm.pf_ppo.weight_pow == 3.0


def test_correction_runs_the_actor_forward_before_the_advantage(tmp_path):
    cfg, _, graph, _ = prepare([*CORRECTION, f"trainer.output_dir={tmp_path}"], None, None)
    order = list(graph.get_execution_order())
    assert order.index("actor_old_log_prob") < order.index("calculate_advantages")
    assert cfg.algorithm.rollout_correction.rollout_rs == "geometric"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["algorithm.use_pf_ppo=True", "algorithm.pf_ppo.reweight_method=softmax", "algorithm.adv_estimator=gae"],
         "unknown pf_ppo reweight_method 'softmax'"),
        ([*PF_PPO, "algorithm.pf_ppo.weight_pow=-1"], "weight_pow=-1"),
        (["algorithm.use_pf_ppo=True"], "resamples after GAE"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_is=seq"], "rollout_is='seq' is invalid"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_rs=median"], "rollout_rs='median' is invalid"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_is_threshold=-2"], "rollout_is_threshold=-2"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_is_threshold='2.0_0.5'"], "needs 0 < lower <= upper"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_rs_threshold=-1"], "rollout_rs_threshold=-1"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_token_veto_threshold=0"], "veto_threshold=0"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_rs_threshold_lower=1.5"], "above the upper bound 1.01"),
        ([*CORRECTION, "actor_rollout_ref.rollout.calculate_log_probs=False"], "set actor_rollout_ref.rollout.calculate_log_probs=true"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_rs='token_k1,seq_k9'"], "rollout_rs='token_k1,seq_k9' is invalid"),
        ([CORRECTION[0], "algorithm.rollout_correction.rollout_rs='token_k1,seq_max_k2'",
          "algorithm.rollout_correction.rollout_rs_threshold='0.6_1.6,2.5,3'"], "gives 3 bounds for 2 rollout_rs options"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_rs=token_k2"], "takes its lower bounds in rollout_rs_threshold"),
        ([*CORRECTION, "algorithm.rollout_correction.rollout_rs_threshold='0.6_1.6'"], "takes one number"),
    ],
)
def test_bad_values_are_one_line(overrides, named):
    with pytest.raises(ConfigError) as info:
        load_config(overrides)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_icepop_threshold_loads_as_verl_writes_it():
    """verl's ``'lower_upper'`` form (IcePop, AReaL's behaviour-weight floor and cap) reaches the config."""
    cfg = load_config([CORRECTION[0], "algorithm.rollout_correction.rollout_is=token",
                       "algorithm.rollout_correction.rollout_is_threshold='0.5_5.0'"])
    assert cfg.algorithm.rollout_correction.rollout_is_threshold == "0.5_5.0"


def test_blank_argument_names_the_shell_mistake():
    with pytest.raises(ConfigError, match="argument 2 is blank") as info:
        load_config(["algorithm.adv_estimator=gae", " "])
    assert "\n" not in str(info.value)


def test_high_diff_dump_needs_recorded_log_probs():
    with pytest.raises(ConfigError, match="trainer.dump_high_diff_tokens=true compares") as info:
        load_config(["trainer.dump_high_diff_tokens=True"])
    assert "\n" not in str(info.value)
    cfg = load_config(["trainer.dump_high_diff_tokens=True", "actor_rollout_ref.rollout.calculate_log_probs=True",
                       "trainer.dump_high_diff_dir=/tmp/dumps"])
    assert cfg.trainer.dump_high_diff_dir == "/tmp/dumps"


@pytest.mark.parametrize("name", [
    "verl_recipe_dapo/recipe/dapo/run_dapo_qwen2.5_32b_rollout_corr",
    "verl_recipe_dapo/recipe/dapo/run_dapo_qwen3_moe_30b_vllm_fp8_rollout",
])
def test_dapo_rollout_correction_scripts_plan_at_their_ulysses_size(name, tmp_path):
    """Those scripts split sequences over more ranks than the replay's 2 devices; at their own size they plan,
    their rollout_correction and dump keys included."""
    from launch_scripts import expectations, replays, write_task_data

    data = write_task_data(tmp_path / "data", train_rows=4096)
    devices = expectations()[name]["devices"]
    (replay,) = replays(name, tmp_path, data, [f"trainer.output_dir={tmp_path / 'out'}", f"trainer.n_gpus_per_node={devices}"])
    cfg, *_ = prepare(replay.overrides, replay.config_path, replay.config_name)
    assert cfg.algorithm.rollout_correction.rollout_is_threshold == 2.0


def test_optimal_token_baseline_needs_sum_pi_squared_from_the_actor_forward():
    with pytest.raises(ConfigError, match="set actor_rollout_ref.actor.calculate_sum_pi_squared=true") as info:
        load_config(["algorithm.adv_estimator=optimal_token_baseline"])
    assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="old_log_prob_source=rollout skips the actor forward"):
        load_config(["actor_rollout_ref.actor.calculate_sum_pi_squared=True",
                     "actor_rollout_ref.actor.old_log_prob_source=rollout"])
    cfg = load_config(["algorithm.adv_estimator=optimal_token_baseline",
                       "actor_rollout_ref.actor.calculate_sum_pi_squared=True"])
    assert cfg.actor_rollout_ref.actor.old_log_prob_source == "recompute"
