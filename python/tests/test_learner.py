"""The learner's side: feed, feed iterators, sample, export, snapshots.

FeedIteratorStubTest and ExportStubTest run against in-process stubs (the
commit rules and the streaming, exactly). The Live* classes run against
the worker at LC_TEST_URL; a route the worker does not have yet (404 "no
route") skips its test, naming the route.
"""

import asyncio
import os
import statistics
import tempfile
import threading
import time
import unittest

from _support import Stub, StubCase, envelope, live_client, require_live, route_or_skip, unique
from feedstub import FeedStub
from test_query import ipc_messages

from lance_context_client import (
    AsyncClient, Client, FeedBatch, InvalidRequestError, LanceContextError, NotFoundError,
)


def ids(batches):
    return [r["id"] for b in batches for r in b]


class FeedIteratorStubTest(StubCase):
    handler = FeedStub

    def setUp(self):
        super().setUp()
        FeedStub.reset()
        FeedStub.add(*({"id": f"r{i}", "role": "assistant" if i % 2 else "user"} for i in range(7)))
        self.lc = Client(self.url, retries=0)

    def tearDown(self):
        self.lc.close()
        super().tearDown()

    def commits(self, group="g"):
        return [e[2] for e in FeedStub.log if e[0] == "commit" and e[1] == group]

    def test_commits_batch_k_when_k_plus_1_is_asked_for(self):
        it = self.lc.feed_batches("s", "g", batch_size=3, wait_ms=0, stop_when_idle=True)
        b1 = next(it)
        self.assertIsInstance(b1, FeedBatch)
        self.assertEqual(([r["id"] for r in b1], b1.position, b1.group), (["r0", "r1", "r2"], "p3", "g"))
        self.assertEqual(self.commits(), [], "nothing is committed while batch 1 is in hand")
        b2 = next(it)
        self.assertEqual(self.commits(), ["p3"])
        # The commit of batch 1 went out before the read of batch 2.
        kinds = [(e[0], e[2]) for e in FeedStub.log]
        self.assertEqual(kinds, [("feed", "p0"), ("commit", "p3"), ("feed", "p3")])
        self.assertEqual([r["id"] for r in b2], ["r3", "r4", "r5"])
        b3 = next(it)
        self.assertEqual([r["id"] for r in b3], ["r6"])
        self.assertEqual(self.commits(), ["p3", "p6"])
        with self.assertRaises(StopIteration):
            next(it)  # caught up: commits batch 3, then an empty answer ends it
        self.assertEqual(self.commits(), ["p3", "p6", "p7"])
        it.close()
        self.assertEqual(self.commits(), ["p3", "p6", "p7"], "nothing left to commit")

    def test_with_block_commits_the_last_batch_on_break(self):
        with self.lc.feed_batches("s", "g", batch_size=2, wait_ms=0) as feed:
            for batch in feed:
                if batch.position == "p4":
                    break
        self.assertEqual(self.commits(), ["p2", "p4"])
        self.assertEqual(self.lc.feed_group("s", "g")["position"], "p4")
        # A new iterator resumes at the committed position.
        with self.lc.feed_batches("s", "g", batch_size=10, wait_ms=0, stop_when_idle=True) as feed:
            self.assertEqual(ids(feed), ["r4", "r5", "r6"])
        self.assertEqual(self.lc.feed_group("s", "g")["position"], "p7")

    def test_exception_leaves_the_batch_in_hand_uncommitted(self):
        with self.assertRaises(ZeroDivisionError):
            with self.lc.feed_batches("s", "g", batch_size=3, wait_ms=0) as feed:
                for batch in feed:
                    if batch.position == "p6":
                        1 / 0  # the training step fails on batch 2
        self.assertEqual(self.commits(), ["p3"])
        with self.lc.feed_batches("s", "g", batch_size=3, wait_ms=0, stop_when_idle=True) as feed:
            self.assertEqual(ids(feed), ["r3", "r4", "r5", "r6"], "batch 2 is delivered again")

    def test_explicit_commit_close_and_start_position(self):
        it = self.lc.feed_batches("s", "g", batch_size=4, wait_ms=0, position="p2")
        b = next(it)
        self.assertEqual([r["id"] for r in b], ["r2", "r3", "r4", "r5"])
        self.assertEqual(it.commit()["position"], "p6")
        self.assertIsNone(it.commit(), "nothing in hand")
        it.close()
        self.assertEqual(self.commits(), ["p6"])
        with self.assertRaises(StopIteration):
            next(it)

    def test_filters_and_empty_answers(self):
        got = []
        with self.lc.feed_batches("s", "g", batch_size=2, wait_ms=0, stop_when_idle=True, role="user") as feed:
            for batch in feed:
                self.assertTrue(batch, "empty answers are not yielded")
                got.append([r["id"] for r in batch])
        self.assertEqual(got, [["r0", "r2"], ["r4", "r6"]])
        reads = [e for e in FeedStub.log if e[0] == "feed"]
        self.assertEqual([e[5] for e in reads], [{"role": "user"}] * len(reads), "filters go with every read")
        self.assertEqual(self.commits()[-1], "p7")

    def test_filtered_empty_answer_that_moves_the_position_is_committed(self):
        with self.lc.feed_batches("s", "g", batch_size=5, wait_ms=0, position="p0", stop_when_idle=True,
                                  role="nobody") as feed:
            self.assertEqual(ids(feed), [])
        self.assertEqual(self.commits(), ["p7"], "passed-over rows are not asked for again")

    def test_waits_and_wakes(self):
        lc = Client(self.url, timeout=1, retries=0)  # the wait is added to the timeout
        FeedStub.reset()
        threading.Timer(1.3, FeedStub.add, args=({"id": "late"},)).start()
        start = time.monotonic()
        ans = lc.feed("s", "g", limit=5, wait_ms=3000)
        took = time.monotonic() - start
        self.assertEqual(([r["id"] for r in ans["records"]], ans["count"]), (["late"], 1))
        self.assertGreater(took, 1.2)
        self.assertLess(took, 3.0)
        start = time.monotonic()
        ans = lc.feed("s", "g", limit=5, wait_ms=1500, position="p1")
        self.assertEqual((ans["count"], ans["position"], ans["records"]), (0, "p1", []))
        self.assertGreater(time.monotonic() - start, 1.4)
        lc.close()

    def test_groups_routes(self):
        self.lc.feed_commit("s", "a", "p2")
        self.lc.feed_commit("s", "a", "p2")  # idempotent
        self.lc.feed_commit("s", "b/1", "p5")
        self.assertEqual([(g["group"], g["position"]) for g in self.lc.feed_groups("s")], [("a", "p2"), ("b/1", "p5")])
        self.assertEqual(self.lc.feed_group("s", "b/1")["position"], "p5")
        self.lc.delete_feed_group("s", "b/1")
        with self.assertRaises(NotFoundError) as cm:
            self.lc.feed_group("s", "b/1")
        self.assertFalse(cm.exception.route_missing)

    def test_async_iterator_same_rules(self):
        async def main():
            async with AsyncClient(self.url, retries=0) as alc:
                st = alc.store("s")
                seen = []
                async with st.feed_batches("g", batch_size=3, wait_ms=0) as feed:
                    async for batch in feed:
                        seen.append(([r["id"] for r in batch], list(self.commits())))
                        if batch.position == "p6":
                            break
                with self.assertRaises(KeyError):
                    async with st.feed_batches("g", batch_size=3, wait_ms=0) as feed:
                        async for batch in feed:
                            raise KeyError("step failed")
                rest = []
                async with st.feed_batches("g", batch_size=10, wait_ms=0, stop_when_idle=True) as feed:
                    async for batch in feed:
                        rest.extend(r["id"] for r in batch)
                return seen, rest

        seen, rest = asyncio.run(main())
        self.assertEqual(seen, [(["r0", "r1", "r2"], []), (["r3", "r4", "r5"], ["p3"])])
        self.assertEqual(rest, ["r6"])
        self.assertEqual(self.commits(), ["p3", "p6", "p7"])


class ExportStubTest(StubCase):
    def arrow(self, n):
        return bytes(i % 251 for i in range(n))

    def test_streams_to_the_file_in_chunks(self):
        body = self.arrow(3 << 20)
        Stub.script = [(200, {"Content-Type": "application/vnd.apache.arrow.stream"}, body)] * 2
        lc = Client(self.url)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rows.arrow")
            n = lc.export("s", path, source="all", columns=["id", "reward"],
                          filters={"role": "assistant", "include_in_training": True}, version=3)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), body)
            self.assertEqual(n, len(body))
            self.assertEqual(os.listdir(d), ["rows.arrow"], "no temporary file left")
        method, target, _, headers = Stub.seen[0]
        self.assertEqual(method, "GET")
        self.assertTrue(target.startswith("/api/v1/rollouts/s/export?"), target)
        for part in ("source=all", "columns=id%2Creward", "role=assistant", "include_in_training=true", "version=3"):
            self.assertIn(part, target)
        self.assertEqual(headers["Accept"], "application/vnd.apache.arrow.stream")

        class Recorder:
            sizes = []

            def write(self, data):
                self.sizes.append(len(data))

        self.assertEqual(lc.export("s", Recorder(), chunk_size=1 << 16), len(body))
        self.assertEqual(sum(Recorder.sizes), len(body))
        self.assertGreaterEqual(len(Recorder.sizes), len(body) // (1 << 16), "written chunk by chunk")
        self.assertLessEqual(max(Recorder.sizes), 1 << 16)

    def test_parquet_format_is_asked_for(self):
        body = b"PAR1" + self.arrow(1 << 16) + b"PAR1"
        Stub.script = [(200, {"Content-Type": "application/vnd.apache.parquet"}, body)]
        lc = Client(self.url)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rows.parquet")
            self.assertEqual(lc.export("s", path, format="parquet", columns=["id"]), len(body))
            with open(path, "rb") as f:
                self.assertEqual(f.read(), body)
        _, target, _, headers = Stub.seen[0]
        self.assertIn("format=parquet", target)
        self.assertEqual(headers["Accept"], "application/vnd.apache.parquet")

    def test_retry_after_503_and_no_file_on_error(self):
        body = self.arrow(1000)
        Stub.script = [(503, {"Retry-After": "0"}, envelope("STORAGE_UNAVAILABLE", "x")), (200, {}, body)]
        lc = Client(self.url, backoff=0.01)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rows.arrow")
            self.assertEqual(lc.export("s", path), 1000)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), body)
            Stub.script = [(400, {}, envelope("INVALID_REQUEST", "no column nope"))]
            with self.assertRaises(InvalidRequestError):
                lc.export("s", os.path.join(d, "bad.arrow"), columns="nope")
            self.assertEqual(os.listdir(d), ["rows.arrow"])

    def test_body_cut_midway_restarts_the_file(self):
        # A torn body (the connection drops after part of it): the retry
        # starts the file over, so it holds one whole body, not a prefix
        # and then a whole body.
        body = self.arrow(200000)
        orig = Stub._answer
        calls = []

        def torn_first(handler):
            calls.append(1)
            if len(calls) == 1:
                handler.send_response(200)
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body[:70000])
                handler.wfile.flush()
                handler.close_connection = True
                return
            orig(handler)

        Stub.do_GET = torn_first
        Stub.script = [(200, {}, body)]
        try:
            lc = Client(self.url, backoff=0.01)
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "rows.arrow")
                self.assertEqual(lc.export("s", path, chunk_size=4096), len(body))
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), body)
        finally:
            Stub.do_GET = orig
        self.assertEqual(len(calls), 2)

    def test_file_object_and_its_errors_are_not_retried(self):
        body = self.arrow(50000)
        Stub.script = [(200, {}, body)] * 2
        lc = Client(self.url, backoff=0.01)
        with tempfile.TemporaryFile() as f:
            self.assertEqual(lc.export("s", f), len(body))
            f.seek(0)
            self.assertEqual(f.read(), body)

        class Full:
            def write(self, data):
                raise OSError(28, "No space left on device")

        with self.assertRaises(OSError) as cm:
            lc.export("s", Full())
        self.assertNotIsInstance(cm.exception, LanceContextError, "the file's error, not a connection error")
        self.assertEqual(len(Stub.seen), 2, "a failing file is not a reason to ask again")


class LiveLearnerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_live(cls)
        cls.lc = live_client()

    @classmethod
    def tearDownClass(cls):
        cls.lc.close()

    def store_with(self, n, **fields):
        st = self.lc.connect_or_create(unique("py-learn"))
        ids = st.add([dict({"rollout_id": f"r{i}", "content": str(i),
                            "role": "assistant" if i % 2 else "user"}, **fields) for i in range(n)], flush=True)["ids"]
        return st, ids

    # -- feed ------------------------------------------------------------------

    def test_feed_each_row_once_per_group(self):
        st, first = self.store_with(10)
        with route_or_skip(self):
            ans = st.feed("a", limit=4, wait_ms=0)
        self.assertEqual((ans["count"], len(ans["records"]), ans["group"]), (4, 4, "a"))
        self.assertIsInstance(ans["position"], str)
        with st.feed_batches("a", batch_size=3, wait_ms=0, stop_when_idle=True) as feed:
            got_a = ids(feed)
        with st.feed_batches("b", batch_size=4, wait_ms=0, stop_when_idle=True) as feed:
            got_b = ids(feed)
        self.assertEqual(sorted(got_a), sorted(first))
        self.assertEqual(sorted(got_b), sorted(first))
        self.assertEqual(len(got_a), len(set(got_a)))
        with st.feed_batches("a", wait_ms=0, stop_when_idle=True) as feed:
            self.assertEqual(ids(feed), [], "a committed group gets nothing again")
        more = st.add([{"rollout_id": "late", "content": str(i)} for i in range(5)], flush=True)["ids"]
        st.merge()  # rows move from the WAL into the base: positions survive
        with st.feed_batches("a", batch_size=2, wait_ms=0, stop_when_idle=True) as feed:
            self.assertEqual(sorted(ids(feed)), sorted(more))
        groups = {g["group"]: g for g in st.feed_groups()}
        self.assertEqual(set(groups), {"a", "b"})
        self.assertEqual(st.feed_group("a")["position"], groups["a"]["position"])
        self.assertTrue(groups["a"]["committed_at"])
        st.delete_feed_group("a")
        with st.feed_batches("a", batch_size=100, wait_ms=0, stop_when_idle=True) as feed:
            self.assertEqual(sorted(ids(feed)), sorted(first + more), "a deleted group starts over")

    def test_feed_commit_is_idempotent(self):
        st, _ = self.store_with(3)
        with route_or_skip(self):
            ans = st.feed("g", limit=10, wait_ms=0)
        c1 = st.feed_commit("g", ans["position"])
        c2 = st.feed_commit("g", ans["position"])
        self.assertEqual((c1["group"], c1["position"]), ("g", ans["position"]))
        self.assertEqual(c2["position"], ans["position"])
        self.assertEqual(st.feed("g", limit=10, wait_ms=0)["count"], 0)

    def test_feed_filter_equals_listing(self):
        st, _ = self.store_with(9, policy_version="v3")
        st.add([{"rollout_id": "x", "role": "assistant", "policy_version": "v4"}], flush=True)
        with route_or_skip(self):
            with st.feed_batches("f", batch_size=2, wait_ms=0, stop_when_idle=True,
                                 policy_version="v3", role="assistant") as feed:
                got = ids(feed)
        listed = [r["id"] for r in st.iter_records(policy_version="v3", role="assistant")]
        self.assertEqual(sorted(got), sorted(listed))
        self.assertEqual(len(listed), 4)

    def test_feed_long_poll_returns_within_the_wait(self):
        st, _ = self.store_with(2)
        with route_or_skip(self):
            ans = st.feed("w", limit=10, wait_ms=0)
        start = time.monotonic()
        empty = st.feed("w", limit=10, wait_ms=600, position=ans["position"])
        took = time.monotonic() - start
        self.assertEqual((empty["count"], empty["records"], empty["position"]), (0, [], ans["position"]))
        self.assertGreaterEqual(took, 0.5)
        self.assertLess(took, 5)

    def test_feed_wakes_on_an_unflushed_append(self):
        st, _ = self.store_with(1)
        with route_or_skip(self):
            ans = st.feed("w", limit=10, wait_ms=0)
        timer = threading.Timer(0.3, lambda: st.add([{"id": "wake", "rollout_id": "w"}]))  # no flush
        timer.start()
        start = time.monotonic()
        got = st.feed("w", limit=10, wait_ms=10000, position=ans["position"])
        took = time.monotonic() - start
        timer.join()
        self.assertEqual([r["id"] for r in got["records"]], ["wake"])
        self.assertLess(took, 5, "an acknowledged append reaches a waiting consumer well before the wait ends")

    # -- sample ----------------------------------------------------------------

    def grpo_store(self):
        """4 problems x 4 rollouts over policy versions v1..v4 (problem k in
        version v(k+1)); p0 has equal rewards."""
        st = self.lc.connect_or_create(unique("py-sample"))
        recs = []
        for p in range(4):
            for i in range(4):
                recs.append({"rollout_id": f"p{p}-r{i}", "problem_id": f"p{p}", "role": "assistant",
                             "reward": 1.0 if p == 0 else float(i % 2), "policy_version": f"v{p + 1}",
                             "content": f"answer {i}"})
            st.add(recs[-4:], flush=True)
            time.sleep(0.01)  # versions appear in order
        return st

    def test_sample_complete_groups_in_the_window(self):
        st = self.grpo_store()
        res = st.sample(n=10, policy_versions={"last": 2}, seed=7)
        keys = sorted(g["key"] for g in res["groups"])
        self.assertEqual(keys, ["p2", "p3"])
        for g in res["groups"]:
            listed = sorted(r["id"] for r in st.iter_records(problem_id=g["key"]))
            self.assertEqual(sorted(r["id"] for r in g["records"]), listed, "a group is complete")
        res = st.sample(n=10, policy_versions={"in": ["v1", "v3"]}, seed=7)
        self.assertEqual(sorted(g["key"] for g in res["groups"]), ["p0", "p2"])

    def test_sample_drop_zero_variance_and_seed(self):
        st = self.grpo_store()
        a = st.sample(n=4, drop_zero_variance=True, seed=11)
        self.assertEqual(sorted(g["key"] for g in a["groups"]), ["p1", "p2", "p3"])
        for g in a["groups"]:
            self.assertGreater(statistics.pstdev(r["reward"] for r in g["records"]), 0)
        b = st.sample(n=2, seed=5)
        c = st.sample(n=2, seed=5)
        self.assertEqual([g["key"] for g in b["groups"]], [g["key"] for g in c["groups"]], "same seed, same batch")

    def test_sample_max_times_sampled_per_consumer_group(self):
        st = self.grpo_store()
        served, calls = {}, 0
        while True:  # until the groups are used up: none, not an error
            keys = [g["key"] for g in st.sample(n=3, group="learner", max_times_sampled=2)["groups"]]
            if not keys:
                break
            calls += 1
            self.assertLessEqual(calls, 8, "4 groups served at most twice each take at most 8 calls")
            self.assertEqual(len(keys), len(set(keys)), "a group once per call")
            for k in keys:
                served[k] = served.get(k, 0) + 1
        self.assertEqual(served, {"p0": 2, "p1": 2, "p2": 2, "p3": 2})
        self.assertEqual(len(st.sample(n=3, group="other")["groups"]), 3, "counts are per consumer group")
        with self.assertRaises(InvalidRequestError):
            st.sample(n=0)

    # -- export and snapshots ------------------------------------------------------

    def test_export_arrow_stream(self):
        st = self.lc.connect_or_create(unique("py-export"))
        st.add([{"rollout_id": f"r{i}", "content": f"row-{i:03d}", "role": "assistant" if i % 2 else "user"}
                for i in range(20)], flush=True)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rows.arrow")
            with route_or_skip(self):
                n = st.export(path, source="all", columns=["id", "content"], filters={"role": "assistant"})
            with open(path, "rb") as f:
                data = f.read()
            self.assertEqual(os.listdir(d), ["rows.arrow"])
        self.assertEqual(n, len(data))
        msgs = ipc_messages(data)  # checks the framing, to the end-of-stream marker
        schema = msgs[0][0]
        self.assertIn(b"content", schema)
        self.assertNotIn(b"rollout_id", schema, "only the columns asked for")
        body = b"".join(m[1] for m in msgs[1:])
        for i in range(20):
            self.assertEqual(f"row-{i:03d}".encode() in body, bool(i % 2), i)
        # A tagged version: what the store held then, not what came after.
        st.merge()
        st.create_tag("t0")
        st.add([{"rollout_id": "later", "content": "row-later"}], flush=True)
        with tempfile.TemporaryFile() as f:
            st.export(f, columns=["content"], snapshot="t0")
            f.seek(0)
            tagged = f.read()
        self.assertIn(b"row-001", tagged)
        self.assertNotIn(b"row-later", tagged)

    def test_export_parquet(self):
        st = self.lc.connect_or_create(unique("py-export-pq"))
        st.add([{"rollout_id": f"r{i}", "content": f"row-{i:03d}"} for i in range(20)], flush=True)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "rows.parquet")
            with route_or_skip(self):
                n = st.export(path, columns=["id", "content"], format="parquet")
            with open(path, "rb") as f:
                data = f.read()
            self.assertEqual(os.listdir(d), ["rows.parquet"])
            with self.assertRaises(InvalidRequestError):
                st.export(os.path.join(d, "bad.csv"), format="csv")
            self.assertEqual(os.listdir(d), ["rows.parquet"], "a refused export writes nothing")
        self.assertEqual(n, len(data))
        # A Parquet file: the magic at both ends, the footer's length before
        # the last one, and the columns asked for named in the footer.
        self.assertEqual(data[:4], b"PAR1")
        self.assertEqual(data[-4:], b"PAR1")
        footer = int.from_bytes(data[-8:-4], "little")
        self.assertLess(footer, len(data))
        meta = data[-8 - footer:-8]
        self.assertIn(b"content", meta)
        self.assertNotIn(b"rollout_id", meta, "only the columns asked for")

    def test_snapshot_lifecycle(self):
        st, _ = self.store_with(5)
        st.add([{"rollout_id": "unflushed", "content": str(i)} for i in range(2)])  # acknowledged, not sealed
        with route_or_skip(self):
            snap = st.create_snapshot(ttl_seconds=120, holder="py-test")
        sid = snap["id"]
        self.assertEqual((snap["lease"]["id"], snap["tag"]), (sid, "lc-snapshot-" + sid))
        self.assertTrue(snap["uri"].endswith(".rollout.lance"), snap["uri"])
        self.assertTrue(snap["lease"]["expires_at"])
        # Everything acknowledged before the call is in the snapshot's version.
        self.assertEqual(st.version(), snap["version"])
        self.assertEqual(len(st.list(source="fragments", limit=100)["records"]), 7)
        self.assertIn(snap["tag"], [t["name"] for t in st.tags()])
        self.assertEqual([s["id"] for s in st.snapshots()], [sid])
        self.assertEqual(st.snapshot(sid)["version"], snap["version"])
        renewed = st.renew_snapshot(sid, ttl_seconds=600)
        self.assertGreater(renewed["lease"]["expires_at"], snap["lease"]["expires_at"])
        st.delete_snapshot(sid)
        with self.assertRaises(NotFoundError):
            st.snapshot(sid)
        self.assertEqual(st.snapshots(), [])


class LiveAsyncLearnerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.url = require_live(cls)

    def run_async(self, fn):
        async def main():
            async with AsyncClient(self.url, retries=3) as lc:
                st = await lc.connect_or_create(unique("py-async-learn"))
                await st.add([{"rollout_id": f"r{i}", "problem_id": f"p{i % 2}", "reward": float(i)}
                              for i in range(6)], flush=True)
                return await fn(st)

        return asyncio.run(main())

    def test_async_sample(self):
        async def fn(st):
            return await st.sample(n=5, seed=3)

        res = self.run_async(fn)
        self.assertEqual(sorted(g["key"] for g in res["groups"]), ["p0", "p1"])
        self.assertEqual(sum(len(g["records"]) for g in res["groups"]), 6)

    def test_async_feed(self):
        async def fn(st):
            async with st.feed_batches("g", batch_size=4, wait_ms=0, stop_when_idle=True) as feed:
                got = [r["id"] async for b in feed for r in b]
            return got, [r["id"] async for r in st.iter_records()]

        with route_or_skip(self):
            got, listed = self.run_async(fn)
        self.assertEqual(sorted(got), sorted(listed))
        self.assertEqual(len(got), 6)


if __name__ == "__main__":
    unittest.main()
