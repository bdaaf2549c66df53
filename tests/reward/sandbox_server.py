"""A local stand-in for a SandboxFusion server: ``POST /run_code`` runs the posted Python with the posted
stdin under ``run_timeout`` and answers in SandboxFusion's response shape. It records the largest number of
requests it served at once."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def run_python(request: dict) -> dict:
    began = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-c", request["code"]], input=request.get("stdin") or "", check=False,
                              capture_output=True, text=True, timeout=request["run_timeout"])
    except subprocess.TimeoutExpired:
        run = {"status": "TimeLimitExceeded", "return_code": None, "stdout": "", "stderr": ""}
    else:
        run = {"status": "Finished", "return_code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
    run["execution_time"] = time.monotonic() - began
    ok = run["status"] == "Finished" and run["return_code"] == 0
    return {"status": "Success" if ok else "Failed", "message": "", "compile_result": None, "run_result": run}


class SandboxHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        server = self.server
        with server.lock:
            server.active += 1
            server.peak = max(server.peak, server.active)
        try:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server.requests.append(request)
            if request["language"] != "python" or self.path != "/run_code":
                self.send_error(400)
                return
            time.sleep(server.delay_s)
            body = json.dumps(run_python(request)).encode()
        finally:
            with server.lock:
                server.active -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def sandbox_server(delay_s: float = 0.0):
    """Yields the server; its URL is ``server.url``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), SandboxHandler)
    server.lock, server.active, server.peak, server.requests, server.delay_s = threading.Lock(), 0, 0, [], delay_s
    server.url = f"http://127.0.0.1:{server.server_address[1]}/run_code"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
