"""What a node does (``NodeType``), whose model or stage it belongs to (``NodeRole``), and the DAG error type."""

from enum import Enum
from typing import TypeVar

from siirl.errors import SiirlUserError


class DAGValidationError(SiirlUserError):
    """A pipeline or workflow file is malformed; the message is one line naming the culprit."""


class NodeType(str, Enum):
    """Kind of work: drives whether a node needs a model engine and which one."""

    MODEL_INFERENCE = "model_inference"
    MODEL_TRAIN = "model_train"
    COMPUTE = "compute"
    DATA_LOAD = "data_load"


class NodeRole(str, Enum):
    """Which model (or algorithm stage) a node belongs to; per-role parallelism is keyed by these values."""

    ROLLOUT = "rollout"
    ACTOR = "actor"
    CRITIC = "critic"
    REFERENCE = "reference"
    TEACHER = "teacher"
    REWARD = "reward"
    ADVANTAGE = "advantage"
    DYNAMIC_SAMPLING = "dynamic_sampling"
    EMBODIED_SAMPLING = "embodied_sampling"
    DEFAULT = "default"


E = TypeVar("E", NodeType, NodeRole)


def parse_enum(enum_cls: type[E], value: object, what: str) -> E:
    """Accept a member, its NAME or its value (any case), so YAML may say ``MODEL_TRAIN`` or ``model_train``.

    ``what`` names the culprit in the error, e.g. ``"node 'actor_train' node_type"``.
    """
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        key = value.strip().lower()
        for member in enum_cls:
            if key in (member.name.lower(), member.value):
                return member
    choices = ", ".join(member.name for member in enum_cls)
    raise DAGValidationError(f"{what} is {value!r}; expected one of {choices}")
