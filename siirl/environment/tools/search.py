"""The built-in ``search`` tool (Search-R1's retriever, as verl's ``SearchTool`` calls it), registered under
verl's and the original siiRL's class paths too, so their ``search_tool_config.yaml`` runs unchanged.

The policy calls ``search`` with ``{"query_list": [...]}``; the tool POSTs ``{"queries", "topk",
"return_scores": true}`` to ``config.retrieval_service_url`` and answers ``{"result": "..."}`` (JSON), the
passages of each query rendered ``Doc i (Title: <first line>)\\n<rest>`` and the queries joined by
``\\n---\\n``. A retriever that is down, slow or answers an error never ends the job: after
``config.max_retries`` retries (each request bounded by ``config.timeout`` seconds) its error text is the tool
response, as in verl. The call as a whole is bounded by ``multi_turn.tool_timeout_s`` as every tool call is.
Step reward and ``calc_reward``: 0 (the answer's score comes from the reward function).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from siirl.environment.tools.base import BaseTool
from siirl.environment.tools.config import TOOLS
from siirl.errors import ConfigError

logger = logging.getLogger(__name__)

#: HTTP statuses worth retrying (the server is busy or restarting), as verl retries them.
RETRIED_STATUSES = (500, 502, 503, 504)
#: Retries after the first attempt; verl makes 10 attempts, here the call's own time bound usually ends first.
DEFAULT_RETRIES = 2


class SearchFailed(RuntimeError):
    """The retriever gave no usable answer; the message becomes the tool response."""


def passages_text(passages: list[dict[str, Any]]) -> str:
    """One query's passages: ``Doc i (Title: <first line of contents>)`` then the rest of the contents."""
    docs = []
    for i, passage in enumerate(passages, start=1):
        title, _, body = passage["document"]["contents"].partition("\n")
        docs.append(f"Doc {i} (Title: {title})\n{body}")
    return "\n\n".join(docs).strip()


#: The numeric ``config`` keys, each positive: key -> (default, type).
POSITIVE_KEYS = {"topk": (3, int), "timeout": (30, float), "rate_limit": (120, int)}


def _setting(config: dict[str, Any], key: str) -> Any:
    default, kind = POSITIVE_KEYS[key]
    return kind(config.get(key, default))


@TOOLS.register(
    "search",
    "verl.tools.search_tool.SearchTool",
    "siirl.execution.rollout_flow.multiturn.tools.search_tool.SearchTool",
)
class SearchTool(BaseTool):
    @classmethod
    def check_config(cls, config: dict[str, Any]) -> None:
        """The driver's check of the YAML entry's ``config`` (one ``ConfigError`` line)."""
        url = config.get("retrieval_service_url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"config.retrieval_service_url must be the retriever's http(s) URL, got {url!r}")
        for key, (default, kind) in POSITIVE_KEYS.items():
            value = config.get(key, default)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or kind is int and value != int(value) or value <= 0:
                raise ConfigError(f"config.{key} must be a positive {kind.__name__}, got {value!r}")
        retries = config.get("max_retries", DEFAULT_RETRIES)
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError(f"config.max_retries must be an integer >= 0, got {retries!r}")

    def __init__(self, config: dict[str, Any], tool_schema: dict[str, Any]) -> None:
        """``config`` passed :meth:`check_config` on the driver, before Ray (``tools.config.check_tools``)."""
        super().__init__(config, tool_schema)
        self.url = self.config["retrieval_service_url"]
        self.topk, self.timeout_s = _setting(self.config, "topk"), _setting(self.config, "timeout")
        self.max_retries = int(self.config.get("max_retries", DEFAULT_RETRIES))
        #: verl's ``rate_limit``: requests in flight at once (here per process, verl's is one Ray actor).
        self._in_flight = threading.BoundedSemaphore(_setting(self.config, "rate_limit"))

    def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[str, float, dict]:
        queries = parameters.get("query_list")
        if not isinstance(queries, list) or not queries or not all(isinstance(q, str) for q in queries):
            return _result("Error: 'query_list' is missing, empty, or not a list of strings."), 0.0, {}
        try:
            with self._in_flight:
                answer = self._post({"queries": queries, "topk": self.topk, "return_scores": True})
            per_query = answer.get("result") if isinstance(answer, dict) else None
            if not isinstance(per_query, list):
                raise SearchFailed("the retriever's answer has no 'result' list")
            if not per_query:
                return _result("No search results found."), 0.0, {"query_count": len(queries), "total_results": 0}
            text = "\n---\n".join(passages_text(passages) for passages in per_query)
        except (SearchFailed, KeyError, TypeError, AttributeError) as exc:
            logger.warning("search tool: %s", exc)
            return _result(f"Search error: {exc}"), 0.0, {"query_count": len(queries), "search_errors": 1}
        total = sum(len(passages) for passages in per_query)
        return _result(text), 0.0, {"query_count": len(queries), "total_results": total}

    def _post(self, payload: dict[str, Any]) -> Any:
        request = urllib.request.Request(
            self.url, data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(attempt)  # verl's linear back-off: 1 s, 2 s, ...
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                    return json.loads(reply.read())
            except urllib.error.HTTPError as exc:
                error = f"retriever {self.url} answered HTTP {exc.code}"
                if exc.code not in RETRIED_STATUSES:
                    break
            except ValueError as exc:
                raise SearchFailed(f"retriever {self.url} answered with invalid JSON: {exc}") from None
            except (urllib.error.URLError, OSError) as exc:
                error = f"retriever {self.url} unreachable: {getattr(exc, 'reason', exc)}"
        raise SearchFailed(f"{error} (after {attempt + 1} attempts)")


def _result(text: str) -> str:
    return json.dumps({"result": text}, ensure_ascii=False)
