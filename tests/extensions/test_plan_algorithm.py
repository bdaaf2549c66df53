"""``--plan`` shows the estimator, the policy loss, the reward function and each node's reads and writes."""

from siirl.main_dag import main

PENALTY = "examples.custom_pipeline.nodes:length_penalty"


def _plan(tmp_path, capsys, *overrides):
    assert main(["--plan", "device=cpu", f"trainer.output_dir={tmp_path}", *overrides]) == 0
    return capsys.readouterr().out


def test_plan_shows_the_algorithm_and_every_nodes_reads_and_writes(tmp_path, capsys):
    out = _plan(tmp_path, capsys)
    assert "  advantage estimator: grpo (siirl.algorithms.outcome_advantage:grpo_advantage)" in out
    assert "  policy loss: vanilla" in out
    assert "  reward: the score function registered for each row's data_source (siirl.reward_score), " \
           "reward manager naive" in out
    reward = out[out.index("  function_reward (siirl.dag_worker.builtin_nodes:compute_reward)"):].splitlines()
    assert reward[1:3] == [
        "    reads: responses, response_mask, data_source, ground_truth", "    writes: token_level_scores, acc, score",
    ]
    actor = out[out.index("  actor_train (siirl.dag_worker.builtin_nodes:train_actor)"):].splitlines()
    assert actor[1].startswith("    reads: input_ids") and actor[1].endswith("old_log_probs, advantages")
    assert actor[3] == "    models: actor"


def test_plan_names_a_users_estimator_reward_and_inserted_node(tmp_path, capsys):
    reward_file = tmp_path / "my_reward.py"
    reward_file.write_text("def my_score(data_source, solution_str, ground_truth, extra_info=None):\n    return 1.0\n")
    out = _plan(
        tmp_path, capsys, "algorithm.adv_estimator=rloo", "actor_rollout_ref.actor.policy_loss.loss_mode=gspo",
        f"custom_reward_function.path={reward_file}", "custom_reward_function.name=my_score",
        f"dag.insert_nodes=[{{after:function_reward,node_id:length_penalty,func:'{PENALTY}'}}]",
    )
    assert "  advantage estimator: rloo (siirl.algorithms." in out and "  policy loss: gspo" in out
    assert f"  reward: my_score from {reward_file} (custom_reward_function), reward manager naive" in out
    penalty = out[out.index(f"  length_penalty ({PENALTY})"):].splitlines()
    assert penalty[1:3] == ["    reads: response_mask, token_level_scores", "    writes: token_level_scores"]
