"""An in-memory server of the feed routes, to test the client's feed
iterators exactly (which position is committed when) without a worker.

Rows are appended with FeedStub.add; a position is "p<N>": the N first rows
are behind it. A filter (any query parameter besides group, limit,
wait_ms and position) is equality on the row's field; rows it passes over
move the position without being delivered, as the real feed does.
"""

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

PREFIX = "/api/v1/rollouts/s/feed"
FIXED = {"group", "limit", "wait_ms", "position"}


class FeedStub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    lock = threading.Condition()
    rows = []
    committed = {}  # group -> (position, committed_at)
    log = []  # ("feed", group, position asked, position answered, n, filters) | ("commit", group, position)

    @classmethod
    def reset(cls):
        with cls.lock:
            cls.rows, cls.committed, cls.log = [], {}, []

    @classmethod
    def add(cls, *rows):
        with cls.lock:
            cls.rows.extend(rows)
            cls.lock.notify_all()

    def _send(self, status, obj):
        data = json.dumps(obj).encode() if obj is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self, what):
        self._send(404, {"error": {"code": "NOT_FOUND", "message": what}})

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        cls = type(self)
        if u.path == PREFIX:
            group = q["group"]
            limit, wait = int(q["limit"]), int(q["wait_ms"]) / 1000.0
            filters = {k: v for k, v in q.items() if k not in FIXED}
            with cls.lock:
                asked = q.get("position") or cls.committed.get(group, ("p0", ""))[0]
                start = int(asked[1:])
                deadline = time.monotonic() + wait
                while True:
                    out, pos = [], start
                    for i in range(start, len(cls.rows)):
                        if len(out) == limit:
                            break
                        pos = i + 1
                        if all(str(cls.rows[i].get(k)) == v for k, v in filters.items()):
                            out.append(cls.rows[i])
                    left = deadline - time.monotonic()
                    if out or left <= 0:
                        break
                    cls.lock.wait(left)
                answered = f"p{pos}"
                cls.log.append(("feed", group, asked, answered, len(out), filters))
            return self._send(200, {"records": out, "position": answered, "count": len(out), "group": group})
        if u.path == PREFIX + "/groups":
            with cls.lock:
                groups = [{"group": g, "position": p, "committed_at": t} for g, (p, t) in sorted(cls.committed.items())]
            return self._send(200, {"groups": groups})
        if u.path.startswith(PREFIX + "/groups/"):
            g = urllib.parse.unquote(u.path[len(PREFIX + "/groups/"):])
            with cls.lock:
                if g not in cls.committed:
                    return self._not_found(f"no consumer group {g!r}")
                p, t = cls.committed[g]
            return self._send(200, {"group": g, "position": p, "committed_at": t})
        self._not_found(f"no route GET {u.path}")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n) or b"{}")
        cls = type(self)
        if self.path == PREFIX + "/commit":
            with cls.lock:
                t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                cls.committed[body["group"]] = (body["position"], t)
                cls.log.append(("commit", body["group"], body["position"]))
            return self._send(200, {"group": body["group"], "position": body["position"], "committed_at": t})
        self._not_found(f"no route POST {self.path}")

    def do_DELETE(self):
        cls = type(self)
        if self.path.startswith(PREFIX + "/groups/"):
            g = urllib.parse.unquote(self.path[len(PREFIX + "/groups/"):])
            with cls.lock:
                if cls.committed.pop(g, None) is None:
                    return self._not_found(f"no consumer group {g!r}")
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        self._not_found(f"no route DELETE {self.path}")

    def log_message(self, *args):
        pass
