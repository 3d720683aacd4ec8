"""Tests of the lance_context client.

LiveWorkerTest runs against a live worker at LC_TEST_URL (python/run_tests.sh
starts one); it is skipped when LC_TEST_URL is unset, unless LC_REQUIRE_PY=1,
then it fails. StubServerTest needs no worker.
"""

import json
import os
import random
import socket
import sys
import threading
import time
import unittest
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from lance_context import Client, LanceContextError, uuid7  # noqa: E402

TEST_URL = os.environ.get("LC_TEST_URL", "")
REQUIRE = os.environ.get("LC_REQUIRE_PY") == "1"


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class LiveWorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not TEST_URL:
            if REQUIRE:
                raise AssertionError("LC_REQUIRE_PY=1 but LC_TEST_URL is unset: start a worker (python/run_tests.sh)")
            raise unittest.SkipTest("LC_TEST_URL is unset: no live worker")
        cls.lc = Client(TEST_URL, timeout=30, retries=3)

    def new_store(self):
        name = unique("py")
        info = self.lc.create_store(name)
        self.assertEqual(info["name"], name)
        self.assertTrue(info["uri"].endswith("/%s.rollout.lance" % name), info)
        self.assertGreaterEqual(info["version"], 1)
        return name

    def counts(self, store):
        return {src: len(self.lc.list(store, source=src, limit=1000)["records"]) for src in ("fragments", "wal", "all")}

    def test_health(self):
        h = self.lc.health()
        self.assertEqual(h["status"], "ok")
        self.assertEqual(h["role"], "worker")

    def test_create_and_conflict(self):
        name = self.new_store()
        self.assertIn(name, self.lc.stores())
        with self.assertRaises(LanceContextError) as cm:
            self.lc.create_store(name)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.code, "ALREADY_EXISTS")
        self.lc.delete_store(name)
        self.assertNotIn(name, self.lc.stores())
        with self.assertRaises(LanceContextError) as cm:
            self.lc.stats(name)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "NOT_FOUND"))

    def test_append_flush_sources_then_merge(self):
        store = self.new_store()
        recs = [{"rollout_id": "r1", "sequence_order": i, "content": f"step {i}"} for i in range(5)]
        res = self.lc.append(store, recs, flush=True)
        self.assertEqual(res["count"], 5)
        self.assertTrue(res["flushed"])
        self.assertEqual(len(set(res["ids"])), 5)
        self.assertNotIn("id", recs[0], "append must not modify the caller's dicts")
        self.assertEqual(self.counts(store), {"fragments": 0, "wal": 5, "all": 5})

        # Unflushed rows are durable but not readable yet.
        self.lc.append(store, [{"rollout_id": "r1", "sequence_order": 5}])
        self.assertEqual(self.counts(store)["all"], 5)
        self.assertEqual(self.lc.stats(store)["unflushed_rows"], 1)

        m = self.lc.merge(store)  # seals, then merges
        self.assertEqual(m["rows"], 6)
        self.assertEqual(m["remaining"], 0)
        self.assertEqual(self.counts(store), {"fragments": 6, "wal": 0, "all": 6})
        st = self.lc.stats(store)
        self.assertEqual((st["rows"], st["base_rows"], st["pending_rows"]), (6, 6, 0))
        c = self.lc.compact(store)
        self.assertIn("version", c)

    def test_same_ids_twice_is_one_row(self):
        store = self.new_store()
        recs = [{"id": uuid7(), "rollout_id": "r", "content": "a"}, {"id": uuid7(), "rollout_id": "r", "content": "b"}]
        self.lc.append(store, recs, flush=True)
        recs[1]["content"] = "b2"
        self.lc.append(store, recs, flush=True)
        self.assertEqual(self.counts(store)["all"], 2)
        self.lc.merge(store)
        self.assertEqual(self.counts(store), {"fragments": 2, "wal": 0, "all": 2})
        self.assertEqual(self.lc.get(store, recs[1]["id"])["content"], "b2")

    def test_filters(self):
        store = self.new_store()
        self.lc.append(store, [
            {"rollout_id": "a", "role": "user", "include_in_training": True, "dataset": "gsm8k"},
            {"rollout_id": "a", "role": "assistant", "include_in_training": False, "dataset": "gsm8k"},
            {"rollout_id": "b", "role": "user", "include_in_training": True, "policy_version": "v2"},
        ], flush=True)
        n = lambda **f: len(self.lc.list(store, source="all", **f)["records"])  # noqa: E731
        self.assertEqual(n(rollout_id="a"), 2)
        self.assertEqual(n(role="user"), 2)
        self.assertEqual(n(rollout_id="a", role="user"), 1)
        self.assertEqual(n(include_in_training=True), 2)
        self.assertEqual(n(include_in_training=False), 1)
        self.assertEqual(n(policy_version="v2"), 1)
        self.assertEqual(n(dataset="gsm8k", role=None), 2)
        self.lc.merge(store)
        self.assertEqual(len(self.lc.list(store, role="user", include_in_training=True)["records"]), 2)
        with self.assertRaises(LanceContextError) as cm:
            self.lc.list(store, reward=1)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "INVALID_REQUEST"))

    def test_iter_records_pages(self):
        store = self.new_store()
        ids = self.lc.append(store, [{"rollout_id": f"r{i % 3}", "content": str(i)} for i in range(23)], flush=True)["ids"]
        got = [r["id"] for r in self.lc.iter_records(store, source="wal", page_size=5)]
        self.assertEqual(sorted(got), sorted(ids))
        page = self.lc.list(store, source="wal", limit=5, offset=20)
        self.assertEqual((len(page["records"]), page["has_more"], page["offset"]), (3, False, 20))
        self.assertTrue(self.lc.list(store, source="wal", limit=5)["has_more"])
        filtered = list(self.lc.iter_records(store, source="all", page_size=2, rollout_id="r1"))
        self.assertEqual(len(filtered), 8)  # i % 3 == 1 for i < 23
        self.assertTrue(all(r["rollout_id"] == "r1" for r in filtered))

    def test_get(self):
        store = self.new_store()
        rec = {
            "id": "step/1",  # a "/" in an id is escaped in the path
            "rollout_id": "run/7", "problem_id": "p1", "sequence_order": 3, "role": "assistant",
            "content": "héllo", "reward": 0.5, "output_tokens": [1, 2, 3], "output_logprobs": [-0.5, -1.25],
            "loss_mask": [0, 1, 1], "include_in_training": True, "metadata": {"temperature": 0.7, "tags": ["a"]},
            "relationships": [{"target_id": "x", "relation": "parent", "weight": 1.0}],
        }
        self.lc.append(store, [rec], flush=True)
        got = self.lc.get(store, "step/1")
        for k in ("id", "rollout_id", "problem_id", "sequence_order", "role", "content", "reward",
                  "output_tokens", "output_logprobs", "loss_mask", "include_in_training", "relationships"):
            self.assertEqual(got[k], rec[k], k)
        # metadata comes back as the JSON value sent, as the reference returns it.
        self.assertEqual(got["metadata"], rec["metadata"])
        self.assertTrue(got["created_at"])
        self.assertNotIn("binary_payload", got)
        with self.assertRaises(LanceContextError) as cm:
            self.lc.get(store, "missing")
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "NOT_FOUND"))

    def test_blob_round_trip(self):
        store = self.new_store()
        payload = bytes(range(256)) + b"\x00\xff" + os.urandom(4096)
        ids = self.lc.append(store, [
            {"rollout_id": "r", "role": "artifact", "content_type": "image/png", "binary_payload": payload},
            {"rollout_id": "r", "binary_payload": bytearray(b"\x00raw")},
            {"rollout_id": "r", "content": "no payload"},
        ], flush=True)["ids"]
        self.assertEqual(self.lc.blob(store, ids[0]), payload)
        self.assertEqual(self.lc.blob_with_type(store, ids[0]), (payload, "image/png"))
        self.assertEqual(self.lc.blob_with_type(store, ids[1]), (b"\x00raw", "application/octet-stream"))
        got = self.lc.get(store, ids[0])
        self.assertEqual(got["payload_size"], len(payload))
        with self.assertRaises(LanceContextError) as cm:
            self.lc.blob(store, ids[2])
        self.assertEqual(cm.exception.code, "NOT_FOUND")
        self.lc.merge(store)
        self.assertEqual(self.lc.blob(store, ids[0]), payload)

    def test_trajectory_order(self):
        store = self.new_store()
        order = list(range(8))
        random.shuffle(order)
        self.lc.append(store, [{"rollout_id": "traj/1", "sequence_order": i, "content": f"s{i}"} for i in order[:4]], flush=True)
        self.lc.append(store, [{"rollout_id": "other", "sequence_order": 0}], flush=True)
        self.lc.merge(store)
        self.lc.append(store, [{"rollout_id": "traj/1", "sequence_order": i, "content": f"s{i}"} for i in order[4:]], flush=True)
        traj = self.lc.trajectory(store, "traj/1")  # base and WAL rows together
        self.assertEqual([r["sequence_order"] for r in traj], list(range(8)))
        self.assertEqual([r["content"] for r in traj], [f"s{i}" for i in range(8)])
        self.assertEqual(self.lc.trajectory(store, "nope"), [])

    def test_4xx_errors(self):
        store = self.new_store()
        with self.assertRaises(LanceContextError) as cm:
            self.lc.append(store, [{"content": "no rollout_id"}])
        e = cm.exception
        self.assertEqual((e.status, e.code), (400, "INVALID_REQUEST"))
        self.assertIn("rollout_id is required", e.message)
        with self.assertRaises(LanceContextError) as cm:
            self.lc.list(store, source="everything")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "INVALID_REQUEST"))
        with self.assertRaises(LanceContextError) as cm:
            self.lc.append(store, [{"rollout_id": "r", "no_such_field": 1}])
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(LanceContextError) as cm:
            self.lc.create_store("_reserved")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "INVALID_REQUEST"))
        with self.assertRaises(LanceContextError) as cm:
            self.lc.append(unique("missing"), [{"rollout_id": "r"}])
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "NOT_FOUND"))


class _Stub(BaseHTTPRequestHandler):
    """Answers from a script: a list of (status, headers, body) per request."""

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

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


def _envelope(code, message):
    return json.dumps({"error": {"code": code, "message": message}}).encode()


class StubServerTest(unittest.TestCase):
    def setUp(self):
        _Stub.script, _Stub.seen = [], []
        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()

    def test_retry_on_503_then_201_with_same_ids(self):
        def created(body):
            ids = [r["id"] for r in json.loads(body)["records"]]
            return json.dumps({"ids": ids, "count": len(ids), "flushed": True}).encode()

        _Stub.script = [
            (503, {"Retry-After": "1", "Content-Type": "application/json"}, _envelope("OVERLOADED", "merge, then retry")),
            (201, {"Content-Type": "application/json"}, created),
        ]
        lc = Client(self.url, token="tok", retries=3, backoff=0.01)
        start = time.monotonic()
        res = lc.append("s", [{"rollout_id": "r", "binary_payload": b"\x00\x01"}, {"id": "mine", "rollout_id": "r"}], flush=True)
        self.assertGreaterEqual(time.monotonic() - start, 0.9, "Retry-After: 1 must be honoured")
        self.assertEqual(len(_Stub.seen), 2)
        bodies = [json.loads(s[2]) for s in _Stub.seen]
        self.assertEqual(bodies[0], bodies[1], "a retry must resend the same records and ids")
        first = bodies[0]["records"]
        self.assertTrue(first[0]["id"])
        self.assertEqual(first[0]["id"][14], "7")  # UUIDv7
        self.assertEqual(first[1]["id"], "mine")
        self.assertTrue(first[0]["created_at"].endswith("+00:00"), "created_at is fixed before the first attempt")
        self.assertEqual(first[0]["binary_payload"], "AAE=")
        self.assertEqual(res["ids"], [first[0]["id"], "mine"])
        method, path, _, headers = _Stub.seen[0]
        self.assertEqual((method, path), ("POST", "/api/v1/rollouts/s/records?flush=true"))
        self.assertEqual(headers.get("Authorization"), "Bearer tok")

    def test_no_retry_on_4xx_and_create(self):
        _Stub.script = [(400, {}, _envelope("INVALID_REQUEST", "bad")), (503, {}, _envelope("STORAGE_UNAVAILABLE", "x"))]
        lc = Client(self.url, retries=3, backoff=0.01)
        with self.assertRaises(LanceContextError) as cm:
            lc.list("s")
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.message), (400, "INVALID_REQUEST", "bad"))
        with self.assertRaises(LanceContextError) as cm:
            lc.create_store("s")
        self.assertEqual(cm.exception.status, 503)
        self.assertEqual(len(_Stub.seen), 2)

    def test_gives_up_and_non_envelope_errors(self):
        _Stub.script = [(503, {"Retry-After": "0"}, b"<html>busy</html>")] * 3
        lc = Client(self.url, retries=2, backoff=0.01)
        with self.assertRaises(LanceContextError) as cm:
            lc.stats("s")
        self.assertEqual((cm.exception.status, cm.exception.code), (503, ""))
        self.assertIn("busy", cm.exception.message)
        self.assertIn("3 attempts", str(cm.exception))
        self.assertEqual(len(_Stub.seen), 3)

    def test_connection_error_is_retried(self):
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        lc = Client("127.0.0.1:%d" % port, retries=2, backoff=0.01, timeout=2)
        start = time.monotonic()
        with self.assertRaises(LanceContextError) as cm:
            lc.health()
        self.assertEqual((cm.exception.status, cm.exception.code), (0, "connection_error"))
        self.assertIn("3 attempts", cm.exception.message)
        self.assertLess(time.monotonic() - start, 10)

    def test_paths_are_escaped(self):
        _Stub.script = [(200, {}, b'{"records": [], "count": 0}')]
        Client(self.url).trajectory("s", "run/1 a")
        self.assertEqual(_Stub.seen[0][1], "/api/v1/rollouts/s/trajectories/run%2F1%20a")

    def test_uuid7(self):
        a, b = uuid7(), uuid7()
        self.assertNotEqual(a, b)
        u = uuid.UUID(a)
        self.assertEqual(u.version, 7)
        self.assertEqual(u.variant, uuid.RFC_4122)
        self.assertLessEqual(abs((u.int >> 80) - time.time() * 1000), 5000)


if __name__ == "__main__":
    unittest.main()
