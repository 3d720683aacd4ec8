"""What the test modules share: the import path, the live worker, a
lance-context dev process started once for the modules that need the
master's routes, route-missing skips and a scripted stub server.

LC_TEST_URL: a live worker (python/run_tests.sh starts one). Without it the
live tests are skipped, unless LC_REQUIRE_PY=1, then they fail.
LC_BIN: the lance-context binary for dev (default bin/lance-context).
LC_PY_PATH: where to import lance_context_client from (default: python/;
run_tests.sh points it at a copy installed with pip).
"""

import atexit
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
ROOT = os.path.dirname(PYDIR)
sys.path.insert(0, os.environ.get("LC_PY_PATH") or PYDIR)

from lance_context_client import Client, NotFoundError  # noqa: E402

TEST_URL = os.environ.get("LC_TEST_URL", "")
REQUIRE = os.environ.get("LC_REQUIRE_PY") == "1"
BIN = os.environ.get("LC_BIN") or os.path.join(ROOT, "bin", "lance-context")

# Routes a test skipped because the server answered 404 "no route": printed
# at exit so a run says what it could not test.
MISSING_ROUTES = set()


def _report_missing():
    if MISSING_ROUTES:
        sys.stderr.write("\nroutes this server does not have (their tests were skipped):\n")
        for r in sorted(MISSING_ROUTES):
            sys.stderr.write(f"  {r}\n")


atexit.register(_report_missing)


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_live(cls):
    """setUpClass body of a live test class: the worker's URL, or skip."""
    if not TEST_URL:
        if REQUIRE:
            raise AssertionError("LC_REQUIRE_PY=1 but LC_TEST_URL is unset: start a worker (python/run_tests.sh)")
        raise unittest.SkipTest("LC_TEST_URL is unset: no live worker")
    return TEST_URL


@contextlib.contextmanager
def route_or_skip(test):
    """Runs the block; a 404 "no route" answer (the server predates the
    route) skips the test with the route named. Any other error fails."""
    try:
        yield
    except NotFoundError as e:
        if not e.route_missing:
            raise
        route = e.message[len("no route "):].split(" (giving up")[0]
        route = re.sub(r"^(\S+ /api/v1/rollouts/)[^/]+", r"\1{name}", route)
        MISSING_ROUTES.add(route)
        test.skipTest(f"the server has no route {route} (404 route not found)")


class Dev:
    """One `lance-context dev` (worker + master on one address) for the
    whole test run, started on first use."""

    _lock = threading.Lock()
    _url = None
    _proc = None
    _tmp = None
    _log = None

    @classmethod
    def url(cls):
        with cls._lock:
            if cls._url is None:
                cls._start()
            return cls._url

    @classmethod
    def _start(cls):
        if not os.path.exists(BIN):
            if REQUIRE:
                raise AssertionError(f"LC_REQUIRE_PY=1 but {BIN} does not exist: build it (python/run_tests.sh)")
            raise unittest.SkipTest(f"{BIN} does not exist")
        cls._tmp = tempfile.mkdtemp()
        url = f"http://127.0.0.1:{free_port()}"
        env = dict(os.environ)
        env.pop("LC_API_TOKEN", None)
        cls._log = open(os.path.join(cls._tmp, "dev.log"), "wb")
        cls._proc = subprocess.Popen(
            [BIN, "dev", "--data-dir", os.path.join(cls._tmp, "data"), "--listen", url[len("http://"):]],
            stdout=cls._log, stderr=subprocess.STDOUT, env=env,
        )
        atexit.register(cls._stop)
        deadline = time.time() + 60
        while True:
            if cls._proc.poll() is not None:
                with open(os.path.join(cls._tmp, "dev.log")) as f:
                    raise AssertionError("lance-context dev exited: " + f.read())
            try:
                urllib.request.urlopen(url + "/api/v1/health", timeout=1).read()
                break
            except OSError:
                if time.time() > deadline:
                    raise AssertionError("lance-context dev did not answer /api/v1/health in 60 s")
                time.sleep(0.2)
        cls._url = url

    @classmethod
    def _stop(cls):
        if cls._proc is not None:
            cls._proc.terminate()
            try:
                cls._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls._proc.kill()
                cls._proc.wait()
            cls._proc = None
        if cls._log is not None:
            cls._log.close()
        if cls._tmp:
            shutil.rmtree(cls._tmp, ignore_errors=True)


def live_client(**kw):
    kw.setdefault("timeout", 30)
    kw.setdefault("retries", 3)
    return Client(TEST_URL, **kw)


# -- a scripted stub server -----------------------------------------------------

class Stub(BaseHTTPRequestHandler):
    """Answers from a script: a list of (status, headers, body) per request;
    body may be a function of the request body. seen records (method, path,
    body, headers)."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the real server
    script = []
    seen = []

    def _answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        type(self).seen.append((self.command, self.path, body, dict(self.headers)))
        status, headers, payload = type(self).script.pop(0) if type(self).script else (500, {}, b"script exhausted")
        if callable(payload):
            payload = payload(body)
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_DELETE = do_PUT = _answer

    def log_message(self, *args):
        pass


def envelope(code, message):
    return json.dumps({"error": {"code": code, "message": message}}).encode()


class StubCase(unittest.TestCase):
    """A test case with a scripted stub server at self.url."""

    handler = Stub

    def setUp(self):
        self.handler.script, self.handler.seen = [], []
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()
