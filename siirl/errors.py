"""Errors a user can act on: the launcher prints them as one line and exits 2, never a traceback.

They may be raised on the driver (before Ray starts) or inside a DAG worker; the driver recovers the
original type from Ray's wrapper, so a ``SiirlUserError`` means exit 2 wherever it was detected.
"""


def first_line(exc: BaseException) -> str:
    """The first line of a library's error, or its type when it says nothing: what a one-line refusal quotes."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class SiirlUserError(ValueError):
    """Base class for mistakes in user input (config, device choice, data or model paths)."""


class ConfigError(SiirlUserError):
    """A config key or value is wrong."""


class DeviceUnavailableError(SiirlUserError):
    """The requested device family is unknown or not usable on this machine."""


class CheckpointError(SiirlUserError):
    """A checkpoint is missing, incomplete, corrupt or tampered with; the message names the file."""


class RewardFunctionError(SiirlUserError):
    """A reward (score) function returned something that is not a score."""


class ClusterError(SiirlUserError):
    """The Ray cluster cannot be reached or cannot hold the planned workers."""


class TrainingDivergedError(SiirlUserError):
    """Updates kept producing non-finite losses or gradients: the weights diverged (usually the learning rate)."""


class UserCallbackError(SiirlUserError):
    """A user's tool, interaction or environment failed (raised or timed out) on every call it ever made."""


class OutputWriteError(SiirlUserError):
    """The file system refused a write under the run directory (disk full, quota, read-only); the message
    names the path and the step."""
