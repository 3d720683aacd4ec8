"""HTTP client of the lance-context worker API (standard library only)."""

from __future__ import annotations

import base64
import datetime as _dt
import email.utils
import http.client
import json
import os
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

__all__ = ["Client", "LanceContextError", "uuid7"]

_RETRY_STATUSES = (502, 503, 504)
_TRANSPORT_ERRORS = (
    urllib.error.URLError,
    http.client.HTTPException,
    ConnectionError,
    TimeoutError,
    socket.timeout,
)


class LanceContextError(Exception):
    """An error answer of the API, or a request that could not be sent.

    status: the HTTP status, 0 when no answer arrived (code "connection_error").
    code: the stable code of the error envelope, e.g. "NOT_FOUND",
        "ALREADY_EXISTS", "INVALID_REQUEST", "OVERLOADED"; "" when the body
        was not the envelope (a proxy's error page).
    message: what went wrong, usually with what to do.
    retry_after: the server's Retry-After in seconds, or None.
    """

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None):
        super().__init__(f"{status} {code or 'error'}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


def uuid7() -> str:
    """A time-ordered UUID (version 7): 48 bits of Unix milliseconds, 12 bits
    of sub-millisecond time, 62 random bits."""
    ns = time.time_ns()
    ms, sub = divmod(ns, 1_000_000)
    rand_a = sub * 4096 // 1_000_000
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


def _retry_after(value: Optional[str]) -> Optional[float]:
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
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, (when - _dt.datetime.now(_dt.timezone.utc)).total_seconds())


def _error_from(status: int, headers: Mapping[str, str], body: bytes) -> LanceContextError:
    retry_after = _retry_after(headers.get("Retry-After"))
    try:
        env = json.loads(body.decode("utf-8"))
        err = env.get("error") if isinstance(env, dict) else None
        if isinstance(err, dict) and (err.get("code") or err.get("message")):
            return LanceContextError(status, err.get("code") or "", err.get("message") or "", retry_after)
    except (ValueError, UnicodeDecodeError):
        pass
    text = body.decode("utf-8", "replace").strip()[:512]
    return LanceContextError(status, "", text or f"HTTP {status}", retry_after)


def _q(segment: str) -> str:
    return urllib.parse.quote(str(segment), safe="")


def _filter_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _prepare(rec: Mapping[str, Any]) -> Dict[str, Any]:
    """Copies a record for the wire: fills a missing id and created_at (so a
    retry resends exactly the same row), base64-encodes bytes payloads and
    formats datetimes (naive ones are taken as UTC)."""
    if not isinstance(rec, Mapping):
        raise TypeError(f"a record must be a dict, got {type(rec).__name__}")
    out = dict(rec)
    if not out.get("id"):
        out["id"] = uuid7()
    payload = out.get("binary_payload")
    if isinstance(payload, (bytes, bytearray, memoryview)):
        out["binary_payload"] = base64.b64encode(bytes(payload)).decode("ascii")
    created = out.get("created_at")
    if created is None:
        created = _dt.datetime.now(_dt.timezone.utc)
    if isinstance(created, _dt.datetime):
        if created.tzinfo is None:
            created = created.replace(tzinfo=_dt.timezone.utc)
        out["created_at"] = created.isoformat()
    return out


class Client:
    """Client of one worker (or anything serving the same API).

    base_url: e.g. "http://127.0.0.1:8080" ("http://" is added when absent).
    token: sent as "Authorization: Bearer <token>" (the worker's LC_API_TOKEN);
        defaults to the LC_API_TOKEN environment variable.
    timeout: seconds per request.
    retries: how many times an idempotent call is retried (after the first
        attempt) on a 502/503/504 answer or a connection error, with
        exponential backoff and jitter, waiting at least the server's
        Retry-After (capped at max_backoff). 4xx answers are never retried,
        nor are create_store and delete_store.
    """

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        timeout: float = 30,
        retries: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 30.0,
    ):
        base = base_url.strip()
        if "://" not in base:
            base = "http://" + base
        self.base_url = base.rstrip("/")
        self.token = token if token is not None else os.environ.get("LC_API_TOKEN") or None
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.max_backoff = max(max_backoff, backoff)
        self.user_agent = "lance-context-python/0.1"

    # -- transport ---------------------------------------------------------

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        d = min(self.backoff * (2 ** (attempt - 1)), self.max_backoff)
        d = d / 2 + random.uniform(0, d / 2)
        if retry_after:
            d = max(d, min(retry_after, self.max_backoff))
        return d

    def _request(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Any]] = None,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        idempotent: bool = True,
        accept: str = "application/json",
    ) -> Tuple[int, Mapping[str, str], bytes]:
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Accept": accept, "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        attempts = 1 + (self.retries if idempotent else 0)
        attempt = 0
        while True:
            attempt += 1
            req = urllib.request.Request(url, data=body, headers=headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return resp.status, resp.headers, resp.read()
            except urllib.error.HTTPError as e:
                try:
                    raw = e.read()
                except Exception:  # noqa: BLE001 - a broken error body is still an error
                    raw = b""
                finally:
                    e.close()
                err = _error_from(e.code, e.headers or {}, raw)
                retry = e.code in _RETRY_STATUSES
            except _TRANSPORT_ERRORS as e:
                reason = getattr(e, "reason", None) or e
                err = LanceContextError(0, "connection_error", f"{method} {url}: {reason}")
                retry = True
            if not retry or attempt >= attempts:
                if attempt > 1:
                    err.message = f"{err.message} (giving up after {attempt} attempts)"
                    err.args = (f"{err.status} {err.code or 'error'}: {err.message}",)
                raise err
            time.sleep(self._delay(attempt, err.retry_after))

    def _json(self, method: str, path: str, payload: Any = None, query=None, idempotent: bool = True) -> Any:
        body = None if payload is None else json.dumps(payload).encode("utf-8")
        _, _, raw = self._request(
            method, path, query=query, body=body,
            content_type="application/json" if body is not None else None, idempotent=idempotent,
        )
        return json.loads(raw) if raw.strip() else None

    @staticmethod
    def _store(store: str, *rest: str) -> str:
        return "/api/v1/rollouts/" + "/".join([_q(store), *rest])

    # -- API ---------------------------------------------------------------

    def health(self) -> dict:
        """{"status": "ok", "role": "worker", "instance_id", "shard_id"}; needs no token."""
        return self._json("GET", "/api/v1/health")

    def create_store(self, name: str) -> dict:
        """Creates a store: {"name", "uri", "version"}; an existing one
        raises LanceContextError 409 "ALREADY_EXISTS". Not retried."""
        return self._json("POST", "/api/v1/rollouts", {"name": name}, idempotent=False)

    def stores(self) -> List[str]:
        """The names of every store, sorted."""
        return [s["name"] for s in self._json("GET", "/api/v1/rollouts")["stores"]]

    def stats(self, store: str) -> dict:
        """Rows (base, pending), fragments, version, WAL backlog per shard."""
        return self._json("GET", self._store(store))

    def delete_store(self, store: str) -> None:
        """Removes a store and all its data. Not retried."""
        self._request("DELETE", self._store(store), idempotent=False)

    def append(self, store: str, records: Iterable[Mapping[str, Any]], flush: bool = False) -> dict:
        """Makes records (dicts) durable; returns {"version", "ids", "count", "flushed"}.

        Records without an "id" get a UUIDv7 before the first attempt, so a
        retry writes the same ids (the newest write of an id wins). bytes in
        "binary_payload" are base64-encoded; "metadata" may be any JSON value.
        With flush=True the rows are readable (source "wal"/"all") on return.
        The caller's dicts are not modified.
        """
        recs = [_prepare(r) for r in records]
        body = json.dumps({"records": recs}).encode("utf-8")
        _, _, raw = self._request(
            "POST", self._store(store, "records"), query={"flush": "true"} if flush else None,
            body=body, content_type="application/json",
        )
        return json.loads(raw)

    def list(self, store: str, source: Optional[str] = None, limit: int = 25, offset: int = 0,
             cursor: Optional[str] = None, **filters: Any) -> dict:
        """One page, in id order: {"records", "has_more", "limit", "offset",
        "source", "next_cursor"}.

        source: "all" (merged and un-merged rows; a worker's default when
        None), "fragments" (the merged base table) or "wal" (flushed, not
        merged). cursor: the previous page's "next_cursor" (following cursors
        returns every row exactly once, merges or not; offsets are for page
        numbers). filters: equality on id, rollout_id, problem_id, dataset,
        role, content_type, policy_version, artifact_type,
        include_in_training (a bool); None values are ignored.
        """
        query: Dict[str, str] = {k: _filter_value(v) for k, v in filters.items() if v is not None}
        query.update(limit=str(limit), offset=str(offset))
        if source:
            query["source"] = source
        if cursor:
            query["cursor"] = cursor
        return self._json("GET", self._store(store, "records"), query=query)

    def iter_records(self, store: str, source: Optional[str] = None, page_size: int = 500, **filters: Any) -> Iterator[dict]:
        """Yields every matching record, following cursors page by page:
        each record that existed when it began exactly once, even while
        flushes, merges and compactions run."""
        cursor = None
        while True:
            page = self.list(store, source=source, limit=page_size, cursor=cursor, **filters)
            yield from page["records"]
            cursor = page.get("next_cursor")
            if not page["has_more"] or not cursor:
                return

    def get(self, store: str, id: str) -> dict:
        """The newest write of a record (without its payload: see blob).
        Raises LanceContextError 404 "NOT_FOUND" when no record has the id
        (the server answers {"record": null})."""
        out = self._json("GET", self._store(store, "records", _q(id)))
        if out.get("record") is None:
            raise LanceContextError(404, "NOT_FOUND", "no record %r in store %r" % (id, store))
        return out["record"]

    def blob_with_type(self, store: str, id: str) -> Tuple[bytes, str]:
        """A record's payload bytes and content type."""
        _, headers, raw = self._request("GET", self._store(store, "records", _q(id), "blob"))
        return raw, headers.get("Content-Type", "application/octet-stream")

    def blob(self, store: str, id: str) -> bytes:
        """A record's payload bytes; raises 404 "NOT_FOUND" when it has none."""
        return self.blob_with_type(store, id)[0]

    def trajectory(self, store: str, rollout_id: str) -> List[dict]:
        """The records of a rollout ordered by sequence_order, then id."""
        return self._json("GET", self._store(store, "trajectories", _q(rollout_id)))["records"]

    def flush(self, store: str) -> dict:
        """Seals the worker's buffered rows so they are readable."""
        return self._json("POST", self._store(store, "flush"))

    def merge(self, store: str) -> dict:
        """One merge pass into the base table: {"generations", "rows",
        "replaced", "remaining", "base_version", ...}. Repeat while
        "remaining" > 0."""
        return self._json("POST", self._store(store, "merge"))

    def compact(self, store: str, target_rows_per_fragment: Optional[int] = None,
                materialize_deletions: Optional[bool] = None) -> dict:
        """{"fragments_removed", "fragments_added", "files_removed",
        "files_added", "version"}; 409 "COMPACTION_IN_PROGRESS" while one runs."""
        opts: Dict[str, Any] = {}
        if target_rows_per_fragment is not None:
            opts["target_rows_per_fragment"] = target_rows_per_fragment
        if materialize_deletions is not None:
            opts["materialize_deletions"] = materialize_deletions
        return self._json("POST", self._store(store, "compact"), opts)

    def compact_stats(self, store: str) -> dict:
        """{"total_fragments", "is_compacting", "last_compaction",
        "last_error", "total_compactions"}."""
        return self._json("GET", self._store(store, "compact", "stats"))

    def checkout(self, store: str, version: int) -> int:
        """Pins the worker's reads of the store to base version `version`
        (time travel, without the WAL tier); the latest version unpins.
        Returns the version reads now see."""
        return self._json("POST", self._store(store, "checkout"), {"version": version})["version"]

    # -- SQL (served by the master and by dev mode) --------------------------

    def query(
        self,
        store: str,
        sql: str,
        source: str = "fragments",
        arrow: bool = False,
        max_rows: Optional[int] = None,
    ) -> Any:
        """Runs one read-only SQL statement where the store is the table
        "records" and other stores are tables of their own names (double-quote
        names with a dot or dash). source: "fragments", "wal" or "all".

        Returns the decoded JSON answer {"columns": [{"name", "type"}],
        "rows": [[...]], "row_count", "truncated", "rows_scanned",
        "elapsed_ms", "scans"}; with arrow=True, the raw bytes of an Arrow IPC
        stream (pyarrow.ipc.open_stream(data).read_all(), or
        polars.read_ipc_stream(data)). max_rows truncates a result larger than
        the server's row limit instead of failing with 422 "query_limit".
        """
        payload: Dict[str, Any] = {"sql": sql, "source": source}
        if max_rows is not None:
            payload["max_rows"] = int(max_rows)
        body = json.dumps(payload).encode("utf-8")
        path = "/api/v1/experiments/" + _q(store) + "/query"
        if arrow:
            _, _, raw = self._request(
                "POST", path, body=body, content_type="application/json",
                accept="application/vnd.apache.arrow.stream",
            )
            return raw
        return self._json("POST", path, payload)
