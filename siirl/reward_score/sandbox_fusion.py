"""Client of a SandboxFusion server (``reward_model.sandbox_fusion.*``): runs a response's code remotely.

verl scores code datasets by posting each test case to SandboxFusion's ``/run_code`` endpoint instead of
executing model output on the training host. Request: ``{"code", "stdin", "language", "compile_timeout",
"run_timeout", "memory_limit_MB", "files", "fetch_files"}``. Response: ``{"status": "Success" | "Failed" |
"SandboxError", "message", "compile_result", "run_result"}``, each result ``{"status": "Finished" |
"Error" | "TimeLimitExceeded", "return_code", "stdout", "stderr", "execution_time"}``.

At most ``max_concurrent`` requests of one scoring process are in flight. A server that cannot be reached
(or keeps answering with errors) raises :class:`SandboxUnavailable`; the reward managers then score the
sample 0 and count it. The client pickles without its semaphore, so each process of the ``parallel``
manager's pool gets its own.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

#: Gateway timeouts (HTTP 504) are retried this many times in all, waiting 1 s, 2 s, ... in between.
ATTEMPTS = 3
#: Seconds the HTTP request may take beyond the compile and run limits (queueing, network).
REQUEST_SLACK_S = 10.0


class SandboxUnavailable(RuntimeError):
    """The sandbox server could not be reached or did not answer with a result: like any failed score call,
    the sample scores 0 and is counted (a server that never answered is the user's error, see FailureLog)."""


@dataclass
class SandboxFusion:
    url: str
    max_concurrent: int = 64
    memory_limit_mb: int = 1024
    #: Compile and run limit of one test case, seconds (verl's default).
    run_timeout_s: float = 10.0
    _slots: threading.BoundedSemaphore | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")

    @property
    def longest_request_s(self) -> float:
        """How long one test case may take: its compile and run limits plus the request's slack."""
        return 2 * self.run_timeout_s + REQUEST_SLACK_S

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_slots": None}

    def run(self, code: str, stdin: str | None = None, language: str = "python") -> dict[str, Any]:
        """The server's response for running ``code`` on ``stdin``; :class:`SandboxUnavailable` if none came."""
        payload = json.dumps({
            "code": code, "stdin": stdin, "language": language, "compile_timeout": self.run_timeout_s,
            "run_timeout": self.run_timeout_s, "memory_limit_MB": self.memory_limit_mb, "files": {},
            "fetch_files": [],
        }).encode()
        if self._slots is None:
            self._slots = threading.BoundedSemaphore(self.max_concurrent)
        with self._slots:
            return self._post(payload)

    def _post(self, payload: bytes) -> dict[str, Any]:
        request = urllib.request.Request(
            self.url, data=payload, headers={"Content-Type": "application/json", "Accept": "application/json"}
        )
        attempt = 1
        while True:
            try:
                with urllib.request.urlopen(request, timeout=self.longest_request_s) as reply:
                    return json.loads(reply.read())
            except urllib.error.HTTPError as exc:
                if exc.code != 504 or attempt == ATTEMPTS:
                    raise SandboxUnavailable(f"sandbox {self.url} answered HTTP {exc.code}") from None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", exc)
                raise SandboxUnavailable(f"sandbox {self.url} unreachable: {reason}") from None
            time.sleep(attempt)
            attempt += 1


def warn_short_sandbox_budget(url: str | None, timeout_s: float) -> None:
    """A code response is scored when its slowest test case returns; a ``reward_model.timeout_s`` below that
    scores slow (but possibly passing) responses 0, and in the in-process managers the step's later ones too.
    ``url``: the configured server, if any."""
    if not url:
        return
    longest = SandboxFusion(url).longest_request_s
    if timeout_s < longest:
        logger.warning(
            "reward_model.timeout_s=%s is shorter than one SandboxFusion test case may take (%gs: compile and run "
            "limits plus the request); raise it so slow code is judged, not timed out", timeout_s, longest,
        )
