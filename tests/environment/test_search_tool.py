"""The built-in search tool against a local server speaking the Search-R1 retriever's API (POST
``{"queries", "topk", "return_scores"}`` -> ``{"result": [[{"document": {"contents"}, "score"}, ...], ...]}``),
including a retriever that is down, slow or failing: its error is the tool response, never the job's end."""

import json
import socket
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from siirl.environment.bounded import ToolTimeout, call_bounded
from siirl.environment.tools import check_tool_classes, load_tool_config
from siirl.environment.tools.config import resolve_tool_class
from siirl.environment.tools.search import SearchTool
from siirl.errors import ConfigError

pytestmark = pytest.mark.timeout(60)

VERL_YAML = (Path(__file__).resolve().parents[1] / "fixtures/launch_scripts/verl/examples/sglang_multiturn/config"
             / "tool_config/search_tool_config.yaml")
SCHEMA = yaml.safe_load(VERL_YAML.read_text())["tools"][0]["tool_schema"]


class Retriever(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server = self.server
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.requests.append(request)
        time.sleep(server.delay_s)
        if server.failures:
            server.failures -= 1
            self.send_error(503)
            return
        result = [[{"document": {"contents": f"{q} title {k}\n{q} text {k}"}, "score": 1.0 / (k + 1)}
                   for k in range(request["topk"])] for q in request["queries"]]
        body = json.dumps({"result": result}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except BrokenPipeError:  # the client gave up waiting (the slow-retriever test)
            pass

    def log_message(self, *args) -> None:
        pass


@contextmanager
def retriever(delay_s: float = 0.0, failures: int = 0):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Retriever)
    server.requests, server.delay_s, server.failures = [], delay_s, failures
    server.url = f"http://127.0.0.1:{server.server_address[1]}/retrieve"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def tool(url, **config):
    return SearchTool({"retrieval_service_url": url, **config}, SCHEMA)


def test_verl_and_siirl_class_paths_resolve_to_the_search_tool():
    assert resolve_tool_class("verl.tools.search_tool.SearchTool") is SearchTool
    assert resolve_tool_class("siirl.execution.rollout_flow.multiturn.tools.search_tool.SearchTool") is SearchTool
    check_tool_classes(load_tool_config(str(VERL_YAML)), str(VERL_YAML))


def test_queries_are_posted_and_passages_formatted():
    with retriever() as server:
        response, reward, metrics = tool(server.url, topk=2).execute("i", {"query_list": ["cats", "dogs"]})
    assert server.requests == [{"queries": ["cats", "dogs"], "topk": 2, "return_scores": True}]
    assert json.loads(response)["result"] == (
        "Doc 1 (Title: cats title 0)\ncats text 0\n\nDoc 2 (Title: cats title 1)\ncats text 1"
        "\n---\nDoc 1 (Title: dogs title 0)\ndogs text 0\n\nDoc 2 (Title: dogs title 1)\ndogs text 1"
    )
    assert reward == 0.0 and metrics == {"query_count": 2, "total_results": 4}


def test_bad_arguments_answer_with_an_error_text():
    response, _, _ = tool("http://127.0.0.1:1/retrieve").execute("i", {"query_list": "cats"})
    assert "query_list" in json.loads(response)["result"]


def test_a_busy_retriever_is_retried_then_answers():
    with retriever(failures=1) as server:
        response, _, metrics = tool(server.url, topk=1, max_retries=1).execute("i", {"query_list": ["x"]})
    assert len(server.requests) == 2 and metrics["total_results"] == 1
    assert json.loads(response)["result"].startswith("Doc 1 (Title: x title 0)")


def test_a_retriever_that_is_down_or_failing_gives_an_error_response():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/retrieve"
    response, reward, metrics = tool(closed, max_retries=0).execute("i", {"query_list": ["x"]})
    assert json.loads(response)["result"].startswith(f"Search error: retriever {closed} unreachable")
    assert reward == 0.0 and metrics["search_errors"] == 1
    with retriever(failures=5) as server:
        response, _, _ = tool(server.url, max_retries=1).execute("i", {"query_list": ["x"]})
    assert "HTTP 503 (after 2 attempts)" in json.loads(response)["result"]


def test_a_slow_retriever_is_bounded_by_the_request_timeout_and_the_call_bound():
    with retriever(delay_s=2.0) as server:
        began = time.monotonic()
        response, _, _ = tool(server.url, timeout=0.3, max_retries=0).execute("i", {"query_list": ["x"]})
        assert time.monotonic() - began < 1.5
        assert "timed out" in json.loads(response)["result"]
        with pytest.raises(ToolTimeout):  # the rollout's own bound (multi_turn.tool_timeout_s) ends the turn
            call_bounded(tool(server.url).execute, 0.3, "i", {"query_list": ["x"]})


@pytest.mark.parametrize("config, message", [
    ({}, "config.retrieval_service_url must be the retriever's http(s) URL, got None"),
    ({"retrieval_service_url": "http://h/retrieve", "topk": 0}, "config.topk must be a positive int, got 0"),
    ({"retrieval_service_url": "http://h/retrieve", "max_retries": -1}, "config.max_retries must be an integer >= 0"),
])
def test_bad_config_is_one_line_before_the_job(tmp_path, config, message):
    entry = {"class_name": "verl.tools.search_tool.SearchTool", "config": config, "tool_schema": SCHEMA}
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"tools": [entry]}))
    with pytest.raises(ConfigError, match="tool 'search': " + message.replace("(", r"\(").replace(")", r"\)")) as exc:
        check_tool_classes(load_tool_config(str(path)), str(path))
    assert "\n" not in str(exc.value)
