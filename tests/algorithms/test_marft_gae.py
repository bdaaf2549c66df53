"""gae_marft: one GAE chain through a team's turns, checked against values worked out by hand."""

import pytest
import torch

from siirl.algorithms import compute_advantage, estimator_needs, masked_whiten
from siirl.algorithms.marft_gae import chain_head
from siirl.params.algorithm import AlgorithmConfig

CFG = AlgorithmConfig(adv_estimator="gae_marft", gamma=0.9, lam=0.8)
T = torch.tensor


def _marft(rewards, values, mask, chain=None):
    return compute_advantage(
        "gae_marft", token_level_rewards=rewards, response_mask=mask, values=values, config=CFG, chain=chain
    )


def test_two_agents_chain_by_hand():
    """Last agent (bootstrap 0), then the agent before it continues from the last agent's first token.

    last agent, tokens (V=.5, .4), reward 1 on its last token (the .3 on a middle token is not counted):
      t1: delta = 1 - .4 = .6                      -> A = .6
      t0: delta = .9*.4 - .5 = -.14                -> A = -.14 + .72*.6 = .292
    first agent, tokens (V=.2, .3), reward .1 on its last token, next value .5, next advantage .292:
      t1: delta = .1 + .9*.5 - .3 = .25            -> A = .25 + .72*.292 = .46024
      t0: delta = .9*.3 - .2 = .07                 -> A = .07 + .72*.46024 = .4013728
    """
    last_mask = T([[1.0, 1.0, 0.0]], dtype=torch.float64)
    last_values = T([[0.5, 0.4, 0.0]], dtype=torch.float64)
    _, last_returns = _marft(T([[0.3, 1.0, 0.0]], dtype=torch.float64), last_values, last_mask)
    assert last_returns[0].tolist() == pytest.approx([0.792, 1.0, 0.0])
    head = chain_head(last_values, last_returns, last_mask, (T([0.0]), T([0.0])))
    assert [h.item() for h in head] == pytest.approx([0.5, 0.292])
    _, first_returns = _marft(
        T([[0.0, 0.1]], dtype=torch.float64), T([[0.2, 0.3]], dtype=torch.float64),
        T([[1.0, 1.0]], dtype=torch.float64), chain=head,
    )
    assert first_returns[0].tolist() == pytest.approx([0.2 + 0.4013728, 0.3 + 0.46024])


def test_advantages_are_whitened_per_agent_and_masked_tokens_skipped():
    """A masked token inside a response neither gets an advantage nor breaks the chain."""
    mask = T([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], dtype=torch.float64)
    values = T([[0.1, 9.0, 0.2], [0.3, 0.4, 9.0]], dtype=torch.float64)
    rewards = T([[0.0, 0.0, 1.0], [0.0, 0.5, 0.0]], dtype=torch.float64)
    advantages, returns = _marft(rewards, values, mask, chain=(T([0.0, 0.0]), T([0.0, 0.0])))
    # row 0: t2 delta = 1 - .2 = .8; t0 (skips t1) delta = .9*.2 - .1 = .08 -> .08 + .72*.8 = .656
    # row 1: t1 delta = .5 - .4 = .1; t0 delta = .9*.4 - .3 = .06 -> .06 + .72*.1 = .132
    raw = T([[0.656, 0.0, 0.8], [0.132, 0.1, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(returns, (raw + values) * mask)
    torch.testing.assert_close(advantages, masked_whiten(raw, mask))


def test_last_agent_equals_gae_on_the_final_reward():
    mask = T([[1.0, 1.0, 1.0]], dtype=torch.float64)
    values = T([[0.1, 0.2, 0.3]], dtype=torch.float64)
    rewards = T([[0.0, 0.0, 1.0]], dtype=torch.float64)
    _, marft_returns = _marft(rewards, values, mask)
    _, gae_returns = compute_advantage(
        "gae", token_level_rewards=rewards, response_mask=mask, values=values, config=CFG
    )
    torch.testing.assert_close(marft_returns, gae_returns)


def test_an_agent_that_answered_nothing_passes_the_chain_through():
    values, returns = torch.zeros(2, 2), T([[0.0, 0.0], [0.7, 0.0]])
    values[1, 0] = 0.2
    mask = T([[0.0, 0.0], [1.0, 0.0]])
    head_value, head_advantage = chain_head(values, returns, mask, (T([0.9, 0.9]), T([0.4, 0.4])))
    assert head_value.tolist() == pytest.approx([0.9, 0.2])
    assert head_advantage.tolist() == pytest.approx([0.4, 0.5])


def test_registered_as_a_chained_critic_estimator():
    needs = estimator_needs("gae_marft")
    assert needs.values and needs.agent_chain and not needs.groups


def test_chain_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="chain values"):
        _marft(torch.zeros(2, 2), torch.zeros(2, 2), torch.ones(2, 2), chain=(torch.zeros(3), torch.zeros(3)))
