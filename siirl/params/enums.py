"""String enums shared by configs, pipelines and algorithms (their values are what users write in YAML)."""

from enum import Enum


class AdvantageEstimator(str, Enum):
    """Names of the advantage estimators; each has a function registered in ``siirl.algorithms``."""

    GRPO = "grpo"
    GAE = "gae"
    CPGD = "cpgd"
    GSPO = "gspo"
    RLOO = "rloo"
    REINFORCE_PLUS_PLUS = "reinforce_plus_plus"
    REINFORCE_PLUS_PLUS_BASELINE = "reinforce_plus_plus_baseline"
    REMAX = "remax"
    GPG = "gpg"
    OPTIMAL_TOKEN_BASELINE = "optimal_token_baseline"
    GAE_MARFT = "gae_marft"
    GDPO = "gdpo"


class WorkflowType(str, Enum):
    """Which family of built-in pipeline a run uses."""

    DEFAULT = "DEFAULT"
    DAPO = "DAPO"
    EMBODIED = "EMBODIED"

    @classmethod
    def _missing_(cls, value: object) -> "WorkflowType | None":
        """Case-insensitive: siiRL's published scripts write ``dapo``."""
        return next((member for member in cls if str(value).lower() == member.value.lower()), None)
