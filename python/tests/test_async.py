"""The asyncio client: the same methods as the sync one, the same behaviour
(live against LC_TEST_URL; retries and errors against a stub), and an event
loop that never blocks on a request."""

import asyncio
import inspect
import json
import time
import unittest

from _support import Stub, StubCase, envelope, require_live, unique

from lance_context_client import (
    AlreadyExistsError, AsyncClient, AsyncFeedIterator, AsyncStore, Client, FeedIterator, InvalidRequestError,
    NotFoundError, OverloadedError, Store,
)


def public(cls):
    return {n for n, _ in inspect.getmembers(cls) if not n.startswith("_")}


class SameMethodsTest(unittest.TestCase):
    def test_clients_have_the_same_methods_and_signatures(self):
        sync, aio = public(Client), public(AsyncClient)
        self.assertEqual(sync - aio, set(), "methods the async client lacks")
        self.assertEqual(aio - sync, {"sync"}, "methods only the async client has")
        for name in sorted(sync):
            s, a = getattr(Client, name), getattr(AsyncClient, name)
            if isinstance(s, property):
                continue
            ps = list(inspect.signature(s).parameters.values())
            pa = list(inspect.signature(a).parameters.values())
            self.assertEqual([(p.name, p.kind, p.default) for p in ps], [(p.name, p.kind, p.default) for p in pa], name)
            if name in ("store",):
                self.assertFalse(inspect.iscoroutinefunction(a), name)
            elif name == "iter_records":
                self.assertTrue(inspect.isasyncgenfunction(a), name)
            elif name == "feed_batches":
                self.assertFalse(inspect.iscoroutinefunction(a), name)
            else:
                self.assertTrue(inspect.iscoroutinefunction(a), name)
            self.assertTrue(a.__doc__, name)

    def test_store_handles_have_the_same_methods(self):
        self.assertEqual(public(Store), public(AsyncStore))
        for name in public(Store) - {"client", "name"}:
            ps = [p.name for p in inspect.signature(getattr(Store, name)).parameters.values()]
            pa = [p.name for p in inspect.signature(getattr(AsyncStore, name)).parameters.values()]
            self.assertEqual(ps, pa, name)
            self.assertNotIn("store", ps, name)
            client_params = [p.name for p in inspect.signature(getattr(Client, name)).parameters.values()]
            self.assertEqual(client_params[1], "store", name)

    def test_feed_iterators_have_the_same_methods(self):
        self.assertEqual(public(FeedIterator) - {"close"}, public(AsyncFeedIterator) - {"close", "aclose"})


class AsyncStubTest(StubCase):
    def test_retry_after_on_503_and_typed_errors(self):
        def created(body):
            ids = [r["id"] for r in json.loads(body)["records"]]
            return json.dumps({"ids": ids, "count": len(ids), "flushed": False}).encode()

        Stub.script = [
            (503, {"Retry-After": "1"}, envelope("OVERLOADED", "merge, then retry")),
            (201, {}, created),
            (409, {}, envelope("ALREADY_EXISTS", "store s exists")),
            (503, {"Retry-After": "0"}, envelope("OVERLOADED", "a")),
            (503, {"Retry-After": "0"}, envelope("OVERLOADED", "b")),
        ]

        async def main():
            async with AsyncClient(self.url, retries=1, backoff=0.01) as lc:
                start = time.monotonic()
                res = await lc.append("s", [{"rollout_id": "r"}])
                waited = time.monotonic() - start
                with self.assertRaises(AlreadyExistsError):
                    await lc.create_store("s")
                with self.assertRaises(OverloadedError) as cm:
                    await lc.stats("s")
                return res, waited, cm.exception

        res, waited, err = asyncio.run(main())
        self.assertGreaterEqual(waited, 0.9, "Retry-After: 1 is honoured")
        self.assertEqual(len(res["ids"]), 1)
        bodies = [json.loads(s[2]) for s in Stub.seen[:2]]
        self.assertEqual(bodies[0], bodies[1])
        self.assertEqual((err.status, err.retry_after), (503, 0.0))
        self.assertIn("2 attempts", err.message)
        self.assertEqual(len(Stub.seen), 5)

    def test_the_loop_does_not_block(self):
        # Three slow answers at once take the time of one, and a timer on
        # the loop ticks meanwhile.
        orig = Stub._answer

        def slow(handler):
            time.sleep(0.5)
            orig(handler)

        Stub.do_GET = slow
        Stub.script = [(200, {}, b'{"status": "ok"}')] * 3
        ticks = []

        async def ticker():
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.05)

        async def main():
            async with AsyncClient(self.url) as lc:
                t = asyncio.ensure_future(ticker())
                start = time.monotonic()
                out = await asyncio.gather(lc.health(), lc.health(), lc.health())
                took = time.monotonic() - start
                t.cancel()
                return out, took

        try:
            out, took = asyncio.run(main())
        finally:
            Stub.do_GET = orig
        self.assertEqual(out, [{"status": "ok"}] * 3)
        self.assertLess(took, 1.2)
        self.assertGreater(len(ticks), 6)


class LiveAsyncTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.url = require_live(cls)

    def test_round_trip(self):
        async def main():
            async with AsyncClient(self.url, retries=3) as lc:
                name = unique("py-async")
                st = await lc.connect_or_create(name)
                again = await lc.connect_or_create(name)
                self.assertIsInstance(st, AsyncStore)
                self.assertEqual(again.name, name)
                v0 = await st.version()
                rid = await st.add_one({"rollout_id": "r", "sequence_order": 1, "content": "b"})
                await st.add([{"rollout_id": "r", "sequence_order": 0, "content": "a"}], flush=True)
                got = await st.get(rid)
                missing = await st.get("nope")
                traj = await st.trajectory("r")
                page = await st.list(limit=1)
                every = [r["id"] async for r in st.iter_records(page_size=1)]
                await st.merge()
                v1 = await st.version()
                with self.assertRaises(InvalidRequestError):
                    await st.list(source="everything")
                with self.assertRaises(NotFoundError):
                    await lc.connect(unique("py-missing"))
                self.assertIn(name, await lc.stores())
                await lc.delete_store(name)
                return got, missing, traj, page, every, v0, v1, rid

        got, missing, traj, page, every, v0, v1, rid = asyncio.run(main())
        self.assertEqual(got["content"], "b")
        self.assertIsNone(missing)
        self.assertEqual([r["content"] for r in traj], ["a", "b"])
        self.assertEqual((len(page["records"]), page["has_more"], page["source"]), (1, True, "all"))
        self.assertEqual(len(every), 2)
        self.assertIn(rid, every)
        self.assertGreater(v1, v0)


if __name__ == "__main__":
    unittest.main()
