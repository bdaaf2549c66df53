"""The planner names each role's builder; the worker's ``MODEL_BUILDERS`` turns the name (or a role of your own's
``module:function``) into the function that builds the model."""

from siirl.dag_worker.models import MODEL_BUILDERS, build_critic, build_policy
from siirl.execution.roles import ROLES


def test_every_builder_the_planner_names_is_registered_on_the_worker():
    named = {role: ROLES.get(role).builder for role in ROLES.names()}
    assert {role: builder for role, builder in named.items() if builder and builder not in MODEL_BUILDERS} == {}
    assert MODEL_BUILDERS.get(named["rollout"]) is build_policy
    assert named["environment"] == ""  # nothing is built: the policy's rollout drives the environment


def test_a_role_of_your_own_names_its_builder_as_module_function():
    assert MODEL_BUILDERS.get("siirl.dag_worker.models:build_critic") is build_critic
