"""HTTP transport of the client: http.client with keep-alive connections,
the error envelope, and retries with backoff and Retry-After.

Standard library only. One idle connection is kept per thread (so the
asyncio client's executor threads each reuse their own); a forked child
never reuses its parent's sockets.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import http.client
import json
import os
import random
import socket
import ssl
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Mapping, Optional

from .errors import ConnectionFailedError, LanceContextError, error_for

JSON = "application/json"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
PARQUET = "application/vnd.apache.parquet"

# Statuses a retry may cure: the server says so (503 with Retry-After) or a
# proxy in front of it does (502, 504).
RETRY_STATUSES = (502, 503, 504)

# What a failed exchange raises when no (complete) answer arrived.
TRANSPORT_ERRORS = (http.client.HTTPException, ConnectionError, TimeoutError, socket.timeout, OSError)

# Failures of a reused keep-alive connection that mean the server closed it
# while idle: the request is sent again at once on a new connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(int(value))
        return secs if secs >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, (when - _dt.datetime.now(_dt.timezone.utc)).total_seconds())


def error_from_answer(status: int, headers: Mapping[str, str], body: bytes) -> LanceContextError:
    """The typed exception of an error answer: the envelope's code and
    message, or the body's text when it is not the envelope."""
    retry_after = parse_retry_after(headers.get("Retry-After"))
    try:
        env = json.loads(body.decode("utf-8"))
        err = env.get("error") if isinstance(env, dict) else None
        if isinstance(err, dict) and (err.get("code") or err.get("message")):
            return error_for(status, str(err.get("code") or ""), str(err.get("message") or ""), retry_after)
    except (ValueError, UnicodeDecodeError):
        pass
    text = body.decode("utf-8", "replace").strip()[:512]
    return error_for(status, "", text or f"HTTP {status}", retry_after)


class _SinkFailed(Exception):
    """The sink (the caller's file) failed: not a transport error, never
    retried; the original exception is re-raised."""

    def __init__(self, err: BaseException):
        super().__init__(err)
        self.err = err


class Answer:
    """A successful answer: status, headers (case-insensitive) and body."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body) if self.body.strip() else None


class Transport:
    """Sends requests to one base URL; see Client for the parameters."""

    def __init__(self, base_url: str, token: Optional[str], timeout: float, retries: int,
                 backoff: float, max_backoff: float, user_agent: str):
        base = base_url.strip()
        if "://" not in base:
            base = "http://" + base
        u = urllib.parse.urlsplit(base)
        if u.scheme not in ("http", "https"):
            raise ValueError(f"base_url must be http:// or https://, got {base_url!r}")
        if not u.hostname:
            raise ValueError(f"base_url has no host: {base_url!r}")
        self.base_url = base.rstrip("/")
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.max_backoff = max(max_backoff, backoff)
        self.user_agent = user_agent
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: "set[http.client.HTTPConnection]" = set()
        self._pid = os.getpid()
        self._ssl = ssl.create_default_context() if u.scheme == "https" else None
        self.sleep: Callable[[float], None] = time.sleep

    # -- connections -------------------------------------------------------

    def _new_conn(self, timeout: float) -> http.client.HTTPConnection:
        if self.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        with self._lock:
            self._open.add(conn)
        return conn

    def _idle(self) -> Optional[http.client.HTTPConnection]:
        if os.getpid() != self._pid:  # a forked child: the sockets are the parent's
            self._local = threading.local()
            self._open = set()
            self._lock = threading.Lock()
            self._pid = os.getpid()
            return None
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        return conn

    def _keep(self, conn: http.client.HTTPConnection) -> None:
        old = getattr(self._local, "conn", None)
        self._local.conn = conn
        if old is not None and old is not conn:
            self._discard(old)

    def _discard(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._open.discard(conn)
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - closing a broken socket
            pass

    def close(self) -> None:
        """Closes every connection this transport opened."""
        with self._lock:
            conns, self._open = list(self._open), set()
        for c in conns:
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
        self._local = threading.local()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit, anything goes
            pass

    # -- one exchange ------------------------------------------------------

    def _exchange(self, method: str, target: str, headers: Dict[str, str], body: Any,
                  timeout: float, reuse: bool, sink: Optional[Callable[[bytes], None]], chunk: int):
        """Sends one request and reads its answer; returns (status, headers,
        body) with body None when it went to sink. Raises TRANSPORT_ERRORS."""
        conn = self._idle() if reuse else None
        fresh = conn is None
        while True:
            if conn is None:
                conn = self._new_conn(timeout)
            elif conn.sock is not None:
                conn.sock.settimeout(timeout)
            try:
                if callable(body):
                    # A stream made anew for each attempt, sent chunked.
                    conn.request(method, target, body=body(), headers=headers, encode_chunked=True)
                else:
                    conn.request(method, target, body=body, headers=headers)
                resp = conn.getresponse()
            except _STALE:
                self._discard(conn)
                if fresh:
                    raise
                conn, fresh = None, True  # the server closed an idle connection: once more on a new one
                continue
            except BaseException:
                self._discard(conn)
                raise
            break
        try:
            if sink is not None and 200 <= resp.status < 300:
                while True:
                    data = resp.read(chunk)
                    if not data:
                        break
                    sink(data)
                if resp.length:
                    # read(n) answers b"" at a connection closed before
                    # Content-Length bytes came (read() would raise).
                    raise http.client.IncompleteRead(b"", resp.length)
                raw = None
            else:
                raw = resp.read()
        except BaseException:
            self._discard(conn)
            raise
        if resp.will_close:
            self._discard(conn)
        else:
            self._keep(conn)
        return resp.status, resp.msg, raw

    def delay(self, attempt: int, retry_after: Optional[float]) -> float:
        """Exponential backoff with jitter, at least the server's Retry-After
        (capped at max_backoff)."""
        d = min(self.backoff * (2 ** (attempt - 1)), self.max_backoff)
        d = d / 2 + random.uniform(0, d / 2)
        if retry_after:
            d = max(d, min(retry_after, self.max_backoff))
        return d

    def request(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        idempotent: bool = True,
        accept: str = JSON,
        timeout: Optional[float] = None,
        sink: Optional[Callable[[bytes], None]] = None,
        restart: Optional[Callable[[], None]] = None,
        chunk: int = 1 << 20,
    ) -> Answer:
        """Sends a request, retrying an idempotent one on 502/503/504 and on
        connection errors; raises the typed error of any other failure.

        sink: receives a 2xx body in chunks (never held whole); restart is
        called before a retry once sink got bytes (None: no retry then).
        """
        target = self.prefix + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        if body is not None:
            headers["Content-Type"] = content_type or JSON
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        attempts = 1 + (self.retries if idempotent else 0)
        t = self.timeout if timeout is None else timeout
        attempt = 0
        while True:
            attempt += 1
            got = [False]

            def counted(data: bytes, _got=got) -> None:
                _got[0] = True
                try:
                    sink(data)  # type: ignore[misc]
                except Exception as e:  # noqa: BLE001 - re-raised as is below
                    raise _SinkFailed(e) from e

            try:
                status, hdrs, raw = self._exchange(method, target, headers, body, t, idempotent,
                                                   counted if sink is not None else None, chunk)
            except _SinkFailed as e:
                raise e.err from None
            except TRANSPORT_ERRORS as e:
                err: LanceContextError = ConnectionFailedError(
                    0, "CONNECTION_ERROR", f"{method} {self.base_url}{target}: {e or type(e).__name__}")
                retry = True
            else:
                if 200 <= status < 300:
                    return Answer(status, hdrs, raw if raw is not None else b"")
                err = error_from_answer(status, hdrs, raw or b"")
                retry = status in RETRY_STATUSES
            if got[0]:
                if restart is None:
                    retry = False
                elif retry and attempt < attempts:
                    restart()
            if not retry or attempt >= attempts:
                if attempt > 1:
                    err.message = f"{err.message} (giving up after {attempt} attempts)"
                raise err
            self.sleep(self.delay(attempt, err.retry_after))

    def json(self, method: str, path: str, payload: Any = None, query: Optional[Mapping[str, Any]] = None,
             idempotent: bool = True, timeout: Optional[float] = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        return self.request(method, path, query=query, body=body, idempotent=idempotent, timeout=timeout).json()


def quote(segment: Any) -> str:
    """One path segment, escaped (a "/" in an id stays inside its segment)."""
    return urllib.parse.quote(str(segment), safe="")


def query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def query_params(params: Mapping[str, Any]) -> Dict[str, str]:
    """Query parameters without the None values; bools as true/false."""
    return {k: query_value(v) for k, v in params.items() if v is not None}


def store_path(store: str, *rest: str) -> str:
    if not isinstance(store, str) or not store:
        raise TypeError(f"store must be a store name (a non-empty str), got {store!r}")
    return "/api/v1/rollouts/" + "/".join([quote(store), *rest])
