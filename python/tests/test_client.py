"""Tests of the lance_context_client sync client.

LiveWorkerTest runs against a live worker at LC_TEST_URL (python/run_tests.sh
starts one); it is skipped when LC_TEST_URL is unset, unless LC_REQUIRE_PY=1,
then it fails. StubServerTest needs no worker.
"""

import json
import os
import pickle
import random
import socket
import time
import unittest
import uuid

from _support import ROOT, Stub, StubCase, envelope, live_client, require_live, unique

from lance_context_client import (
    AlreadyExistsError, Client, ConnectionFailedError, InvalidRequestError, LanceContextError, NotFoundError,
    StorageUnavailableError, Store, uuid7,
)
from lance_context_client.errors import ERROR_CLASSES


class LiveWorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_live(cls)
        cls.lc = live_client()

    @classmethod
    def tearDownClass(cls):
        cls.lc.close()

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
        with self.assertRaises(AlreadyExistsError) as cm:
            self.lc.create_store(name)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.code, "ALREADY_EXISTS")
        self.lc.delete_store(name)
        self.assertNotIn(name, self.lc.stores())
        with self.assertRaises(NotFoundError) as cm:
            self.lc.stats(name)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "NOT_FOUND"))
        self.assertFalse(cm.exception.route_missing)

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
        with self.assertRaises(InvalidRequestError) as cm:
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
        self.assertIsNone(self.lc.get(store, "missing"))  # the server answers {"record": null}

    def test_large_payload_streams_both_ways(self):
        # 9 MiB: above the worker's inline size (8 MiB), so the part is
        # streamed into an object of its own; sent from a file object and
        # from bytes, read back into a file a MiB at a time.
        import hashlib
        import io
        import tempfile
        store = self.new_store()
        data = os.urandom(9 << 20)
        with tempfile.TemporaryFile() as f:
            f.write(b"skipped header")
            start = f.tell()
            f.write(data)
            f.seek(start)
            a = self.lc.append_payload(store, {"rollout_id": "r", "content_type": "application/x-tar"}, f, flush=True)
        b = self.lc.append_payload(store, {"rollout_id": "r"}, data, flush=True)
        for rid in (a["ids"][0], b["ids"][0]):
            out = io.BytesIO()
            self.assertEqual(self.lc.download_blob(store, rid, out), len(data))
            self.assertEqual(out.getvalue(), data)
            rec = self.lc.get(store, rid)
            self.assertEqual(rec["payload_size"], len(data))
            self.assertEqual(rec["payload_checksum"], hashlib.sha256(data).hexdigest())
        self.assertEqual(self.lc.blob_with_type(store, a["ids"][0])[1], "application/x-tar")

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
        with self.assertRaises(NotFoundError) as cm:
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

    def test_connect_or_create_reruns(self):
        # Regression (issue 28): the README's first example compared
        # e.code with "already_exists" and re-raised on every rerun; the
        # server sends ALREADY_EXISTS. connect_or_create twice is one store.
        name = unique("py-coc")
        a = self.lc.connect_or_create(name)
        b = self.lc.connect_or_create(name)
        self.assertIsInstance(a, Store)
        self.assertEqual((a.name, b.name), (name, name))
        self.assertEqual(self.lc.stores().count(name), 1)
        with self.assertRaises(AlreadyExistsError) as cm:
            self.lc.create_store(name)
        self.assertEqual(cm.exception.code, "ALREADY_EXISTS")
        self.assertIsInstance(cm.exception, LanceContextError)
        with self.assertRaises(NotFoundError):
            self.lc.connect(unique("py-missing"))

    def test_store_handle_reference_names(self):
        st = self.lc.connect_or_create(unique("py-h"))
        v0 = st.version()
        self.assertIsInstance(v0, int)
        rid = st.add_one({"rollout_id": "r", "content": "one"}, flush=True)
        self.assertEqual(uuid.UUID(rid).version, 7)
        res = st.add([{"id": "x1", "rollout_id": "r", "content": "two"}], flush=True)
        self.assertEqual((res["ids"], res["count"]), (["x1"], 1))
        self.assertEqual(st.get(rid)["content"], "one")
        self.assertIsNone(st.get("nope"))
        self.assertEqual(st.version(), v0, "an append does not advance the base version")
        st.merge()
        self.assertGreater(st.version(), v0)
        self.assertEqual(sorted(r["id"] for r in st.iter_records()), sorted([rid, "x1"]))

    def test_list_default_source_is_all(self):
        # Regression (issue 28): the README said list defaults to fragments.
        st = self.lc.connect_or_create(unique("py-src"))
        st.add([{"rollout_id": "r"}], flush=True)
        page = st.list()
        self.assertEqual(page["source"], "all")
        self.assertEqual(len(page["records"]), 1)
        self.assertEqual(len(st.list(source="fragments")["records"]), 0)

    def test_lifecycle_tags_leases_retention_cleanup(self):
        st = self.lc.connect_or_create(unique("py-life"))
        st.add([{"rollout_id": "r", "content": "a"}], flush=True)
        st.merge()
        v = st.version()
        tag = st.create_tag("before", version=v)
        self.assertEqual((tag["name"], tag["version"]), ("before", v))
        self.assertEqual([t["name"] for t in st.tags()], ["before"])
        self.assertEqual(st.tag("before")["version"], v)
        with self.assertRaises(AlreadyExistsError):
            st.create_tag("before")
        lease = st.take_lease(version=v, ttl_seconds=60, holder="py-test")
        self.assertEqual(lease["version"], v)
        self.assertEqual(st.lease(lease["id"])["holder"], "py-test")
        renewed = st.renew_lease(lease["id"], ttl_seconds=120)
        self.assertGreater(renewed["expires_at"], lease["expires_at"])
        self.assertEqual([l["id"] for l in st.leases()], [lease["id"]])
        st.add([{"rollout_id": "r", "content": "b"}], flush=True)
        st.merge()
        res = st.cleanup(older_than_seconds=0, read_grace_seconds=0)
        self.assertIn(v, res["tagged_versions"])
        self.assertIn(v, res["held_versions"])
        st.release_lease(lease["id"])
        with self.assertRaises(NotFoundError):
            st.lease(lease["id"])
        st.delete_tag("before")
        with self.assertRaises(NotFoundError):
            st.tag("before")
        self.assertEqual(st.retention(), {"max_age_seconds": 0, "keep_policy_versions": 0})
        self.assertEqual(st.set_retention(keep_policy_versions=3), {"max_age_seconds": 0, "keep_policy_versions": 3})
        self.assertEqual(st.retention()["keep_policy_versions"], 3)
        with self.assertRaises(InvalidRequestError):
            st.set_retention(max_age_seconds=-1)


def _created(body):
    ids = [r["id"] for r in json.loads(body)["records"]]
    return json.dumps({"ids": ids, "count": len(ids), "flushed": True}).encode()


class StubServerTest(StubCase):
    def test_retry_on_503_then_201_with_same_ids(self):
        Stub.script = [
            (503, {"Retry-After": "1", "Content-Type": "application/json"}, envelope("OVERLOADED", "merge, then retry")),
            (201, {"Content-Type": "application/json"}, _created),
        ]
        lc = Client(self.url, token="tok", retries=3, backoff=0.01)
        start = time.monotonic()
        res = lc.append("s", [{"rollout_id": "r", "binary_payload": b"\x00\x01"}, {"id": "mine", "rollout_id": "r"}], flush=True)
        self.assertGreaterEqual(time.monotonic() - start, 0.9, "Retry-After: 1 must be honoured")
        self.assertEqual(len(Stub.seen), 2)
        bodies = [json.loads(s[2]) for s in Stub.seen]
        self.assertEqual(bodies[0], bodies[1], "a retry must resend the same records and ids")
        first = bodies[0]["records"]
        self.assertTrue(first[0]["id"])
        self.assertEqual(first[0]["id"][14], "7")  # UUIDv7
        self.assertEqual(first[1]["id"], "mine")
        self.assertTrue(first[0]["created_at"].endswith("+00:00"), "created_at is fixed before the first attempt")
        self.assertEqual(first[0]["binary_payload"], "AAE=")
        self.assertEqual(res["ids"], [first[0]["id"], "mine"])
        method, path, _, headers = Stub.seen[0]
        self.assertEqual((method, path), ("POST", "/api/v1/rollouts/s/records?flush=true"))
        self.assertEqual(headers.get("Authorization"), "Bearer tok")

    def test_no_retry_on_4xx_and_not_idempotent_calls(self):
        Stub.script = [(400, {}, envelope("INVALID_REQUEST", "bad"))] + [(503, {"Retry-After": "0"}, envelope("STORAGE_UNAVAILABLE", "x"))] * 4
        lc = Client(self.url, retries=3, backoff=0.01)
        with self.assertRaises(InvalidRequestError) as cm:
            lc.list("s")
        self.assertEqual((cm.exception.status, cm.exception.code, cm.exception.message), (400, "INVALID_REQUEST", "bad"))
        for call in (lambda: lc.create_store("s"), lambda: lc.sample("s", n=2, group="g"),
                     lambda: lc.take_lease("s"), lambda: lc.create_snapshot("s")):
            with self.assertRaises(StorageUnavailableError) as cm:
                call()
            self.assertEqual(cm.exception.status, 503)
        self.assertEqual(len(Stub.seen), 5, "4xx and calls that are not idempotent are sent once")
        self.assertEqual(json.loads(Stub.seen[2][2]), {"n": 2, "group": "g"})

    def test_gives_up_and_non_envelope_errors(self):
        Stub.script = [(503, {"Retry-After": "0"}, b"<html>busy</html>")] * 3
        lc = Client(self.url, retries=2, backoff=0.01)
        with self.assertRaises(LanceContextError) as cm:
            lc.stats("s")
        self.assertIs(type(cm.exception), LanceContextError, "a body that is not the envelope has no code")
        self.assertEqual((cm.exception.status, cm.exception.code), (503, ""))
        self.assertIn("busy", cm.exception.message)
        self.assertIn("3 attempts", str(cm.exception))
        self.assertEqual(len(Stub.seen), 3)

    def test_each_code_has_its_class(self):
        lc = Client(self.url, retries=0)
        for code, cls in ERROR_CLASSES.items():
            Stub.script = [(418, {"Retry-After": "7"}, envelope(code, "m-" + code))]
            with self.assertRaises(cls) as cm:
                lc.health()
            e = cm.exception
            self.assertEqual((type(e), e.status, e.code, e.message, e.retry_after), (cls, 418, code, "m-" + code, 7.0))
            again = pickle.loads(pickle.dumps(e))
            self.assertEqual((type(again), again.status, again.code, again.message), (cls, 418, code, "m-" + code))
        Stub.script = [(409, {}, envelope("SOMETHING_NEWER", "from a newer server"))]
        with self.assertRaises(LanceContextError) as cm:
            lc.health()
        self.assertIs(type(cm.exception), LanceContextError)
        self.assertEqual(cm.exception.code, "SOMETHING_NEWER")

    def test_connection_error_is_retried(self):
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        lc = Client("127.0.0.1:%d" % port, retries=2, backoff=0.01, timeout=2)
        start = time.monotonic()
        with self.assertRaises(ConnectionFailedError) as cm:
            lc.health()
        self.assertEqual((cm.exception.status, cm.exception.code), (0, "CONNECTION_ERROR"))
        self.assertIn("3 attempts", cm.exception.message)
        self.assertLess(time.monotonic() - start, 10)

    def test_paths_are_escaped(self):
        Stub.script = [(200, {}, b'{"records": [], "count": 0}'), (200, {}, b'{"record": null}')]
        lc = Client(self.url)
        lc.trajectory("s", "run/1 a")
        self.assertIsNone(lc.store("s.v1").get("id?#/x"))
        self.assertEqual(Stub.seen[0][1], "/api/v1/rollouts/s/trajectories/run%2F1%20a")
        self.assertEqual(Stub.seen[1][1], "/api/v1/rollouts/s.v1/records/id%3F%23%2Fx")

    def test_base_url_path_prefix_and_env(self):
        Stub.script = [(200, {}, b'{"status": "ok"}')] * 2
        Client(self.url + "/behind/proxy/").health()
        self.assertEqual(Stub.seen[0][1], "/behind/proxy/api/v1/health")
        old = os.environ.get("LC_URL")
        os.environ["LC_URL"] = self.url
        try:
            lc = Client()
            self.assertEqual(lc.base_url, self.url)
            lc.health()
        finally:
            if old is None:
                del os.environ["LC_URL"]
            else:
                os.environ["LC_URL"] = old
        self.assertEqual(len(Stub.seen), 2)

    def test_keep_alive_reuses_one_connection(self):
        Stub.script = [(200, {}, b'{"status": "ok"}')] * 5
        ports = []
        orig = Stub._answer

        def spy(handler):
            ports.append(handler.client_address[1])
            orig(handler)

        Stub.do_GET = spy
        try:
            lc = Client(self.url)
            for _ in range(5):
                lc.health()
            lc.close()
        finally:
            Stub.do_GET = orig
        self.assertEqual(len(set(ports)), 1, f"five calls, connections from ports {ports}")

    def test_stale_keep_alive_connection_is_replaced(self):
        # Regression: a server that closes an idle keep-alive connection
        # (Go's IdleTimeout) must not fail the next idempotent call.
        orig = Stub._answer

        def answer_then_close(handler):
            orig(handler)
            handler.close_connection = True  # closes without saying so

        Stub.do_GET = answer_then_close
        Stub.script = [(200, {}, b'{"status": "ok"}')] * 3
        try:
            lc = Client(self.url, retries=0)
            for _ in range(3):
                self.assertEqual(lc.health(), {"status": "ok"})
        finally:
            Stub.do_GET = orig
        self.assertEqual(len(Stub.seen), 3)

    def test_uuid7(self):
        a, b = uuid7(), uuid7()
        self.assertNotEqual(a, b)
        u = uuid.UUID(a)
        self.assertEqual(u.version, 7)
        self.assertEqual(u.variant, uuid.RFC_4122)
        self.assertLessEqual(abs((u.int >> 80) - time.time() * 1000), 5000)


class ErrorCodesTest(unittest.TestCase):
    def test_one_class_per_server_code(self):
        # The codes the server sends (api/errors.go): each has its class,
        # and the client knows no code the server does not have.
        import re
        path = os.path.join(ROOT, "api", "errors.go")
        if not os.path.exists(path):
            self.skipTest("api/errors.go is not here (an installed copy)")
        with open(path) as f:
            codes = set(re.findall(r'^\s*Code\w+\s*=\s*"([A-Z_]+)"', f.read(), re.M))
        self.assertGreater(len(codes), 10)
        self.assertEqual(set(ERROR_CLASSES), codes)
        for code, cls in ERROR_CLASSES.items():
            self.assertTrue(issubclass(cls, LanceContextError))
            self.assertEqual(cls.code_name, code)


if __name__ == "__main__":
    unittest.main()
