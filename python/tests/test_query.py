"""SQL tests of the lance_context_client client and the `lance-context sql` verb.

The query API is the master's, so this suite uses a `lance-context dev`
(worker + master on one address) started from bin/lance-context
(python/run_tests.sh builds it; LC_BIN overrides the path; see _support.Dev).
Without the binary it is skipped, unless LC_REQUIRE_PY=1, then it fails.
"""

import json
import struct
import subprocess
import unittest
import uuid

from _support import BIN, Dev

from lance_context_client import Client, InvalidRequestError, LanceContextError, QueryLimitError

CONTINUATION = b"\xff\xff\xff\xff"


def ipc_messages(data):
    """Splits an Arrow IPC stream into (metadata, body) pairs, checking its
    framing: each message is the continuation marker, a little-endian int32
    metadata length, the flatbuffer metadata (8-byte padded) and a body whose
    length the metadata gives; the stream ends with a zero length."""
    out, pos = [], 0
    while True:
        if data[pos:pos + 4] != CONTINUATION:
            raise AssertionError(f"no continuation marker at {pos}")
        (n,) = struct.unpack_from("<i", data, pos + 4)
        pos += 8
        if n == 0:
            if pos != len(data):
                raise AssertionError(f"{len(data) - pos} bytes after the end-of-stream marker")
            return out
        meta = data[pos:pos + n]
        pos += n
        # Message table: body length is the int64 field 3 (bodyLength); find
        # it through the flatbuffer vtable.
        (root,) = struct.unpack_from("<I", meta, 0)
        (vt_off,) = struct.unpack_from("<i", meta, root)
        vt = root - vt_off
        (vt_len,) = struct.unpack_from("<H", meta, vt)
        body_len = 0
        if vt_len > 4 + 2 * 3:
            (f,) = struct.unpack_from("<H", meta, vt + 4 + 2 * 3)
            if f:
                (body_len,) = struct.unpack_from("<q", meta, root + f)
        out.append((meta, data[pos:pos + body_len]))
        pos += body_len


class DevQueryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.url = Dev.url()
        cls.lc = Client(cls.url, timeout=60, retries=3)
        cls.store = "pysql-" + uuid.uuid4().hex[:8]
        cls.lc.create_store(cls.store)
        recs = [
            {"rollout_id": f"r{i // 2}", "problem_id": "p", "role": "assistant", "content": "x" * i,
             "reward": float(i), "policy_version": str(i % 3)}
            for i in range(12)
        ]
        cls.lc.append(cls.store, recs, flush=True)

    @classmethod
    def tearDownClass(cls):
        cls.lc.close()

    def test_query_json_matches_listing(self):
        res = self.lc.query(self.store, "SELECT policy_version, sum(reward) AS s, count(*) AS n FROM records GROUP BY 1 ORDER BY 1",
                            source="all")
        self.assertEqual([c["name"] for c in res["columns"]], ["policy_version", "s", "n"])
        listed = self.lc.list(self.store, source="all", limit=100)["records"]
        want = {}
        for r in listed:
            s, n = want.get(r["policy_version"], (0.0, 0))
            want[r["policy_version"]] = (s + r["reward"], n + 1)
        self.assertEqual({row[0]: (row[1], row[2]) for row in res["rows"]}, want)
        self.assertEqual(res["row_count"], 3)
        self.assertEqual(res["rows_scanned"], 12)
        self.assertFalse(res["truncated"])
        # fragments is empty until a merge.
        self.assertEqual(self.lc.query(self.store, "SELECT count(*) FROM records")["rows"], [[0]])

    def test_query_arrow(self):
        data = self.lc.query(self.store, "SELECT 4242::BIGINT AS answer, 'greeting-text' AS word, count(*) AS n FROM records",
                             source="all", arrow=True)
        self.assertIsInstance(data, bytes)
        msgs = ipc_messages(data)
        self.assertEqual(len(msgs), 2, "a schema message and one record batch")
        schema_meta, batch_meta = msgs[0][0], msgs[1][0]
        for name in (b"answer", b"word", b"n"):
            self.assertIn(name, schema_meta)
        body = msgs[1][1]
        self.assertIn(struct.pack("<q", 4242), body)
        self.assertIn(struct.pack("<q", 12), body)
        self.assertIn(b"greeting-text", body)
        self.assertTrue(batch_meta)
        try:
            import pyarrow.ipc  # noqa: F401 - optional: decode fully when present
        except ImportError:
            return
        table = pyarrow.ipc.open_stream(data).read_all()
        self.assertEqual(table.to_pylist(), [{"answer": 4242, "word": "greeting-text", "n": 12}])

    def test_query_errors(self):
        with self.assertRaises(InvalidRequestError) as cm:
            self.lc.query(self.store, "SELECT * FROM read_csv('/etc/passwd')")
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "INVALID_REQUEST"))
        with self.assertRaises(LanceContextError) as cm:
            self.lc.query("no-such-store", "SELECT 1")
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(QueryLimitError) as cm:
            self.lc.query(self.store, "SELECT * FROM range(100000)")
        self.assertEqual((cm.exception.status, cm.exception.code), (422, "QUERY_LIMIT"))
        self.assertIn("max_rows_returned", cm.exception.message)
        res = self.lc.query(self.store, "SELECT * FROM range(100000)", max_rows=7)
        self.assertEqual((res["row_count"], res["truncated"]), (7, True))

    def test_cli_sql(self):
        base = [BIN, "sql", "--url", self.url, "--store", self.store, "--source", "all"]
        out = subprocess.run(base + ["--format", "json", "SELECT max(reward) AS m FROM records"],
                             check=True, capture_output=True, timeout=60).stdout
        self.assertEqual(json.loads(out)["rows"], [[11.0]])
        out = subprocess.run(base + ["SELECT role, count(*) AS n FROM records GROUP BY 1"],
                             check=True, capture_output=True, timeout=60).stdout.decode()
        self.assertRegex(out, r"role\s+n\nassistant\s+12\n")
        out = subprocess.run(base + ["--format", "arrow", "SELECT 77::BIGINT AS seventy_seven"],
                             check=True, capture_output=True, timeout=60).stdout
        msgs = ipc_messages(out)
        self.assertIn(b"seventy_seven", msgs[0][0])
        self.assertIn(struct.pack("<q", 77), msgs[1][1])
        bad = subprocess.run(base + ["DELETE FROM records"], capture_output=True, timeout=60)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn(b"INVALID_REQUEST", bad.stderr)


if __name__ == "__main__":
    unittest.main()
