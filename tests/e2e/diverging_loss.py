"""A policy loss whose gradient stops being finite after the first update, for the fault test of skipped
updates: a wrecked model's numerics (lr=1e3 and the like) depend on the torch build, this does not.

The fault test runs one micro-batch per optimiser step, so each call here is one update of this rank."""

from siirl.algorithms.policy_loss import vanilla_policy_loss

_UPDATES = [0]


def nan_after_first_update(inputs):
    loss, metrics = vanilla_policy_loss(inputs)
    _UPDATES[0] += 1
    if _UPDATES[0] > 1:
        loss = loss * float("nan")
    return loss, metrics
