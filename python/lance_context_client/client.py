"""The synchronous client of the lance-context HTTP API (standard library only)."""

from __future__ import annotations

import base64
import datetime as _dt
import inspect
import json
import os
import tempfile
import time
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from . import _transport as tp
from .errors import AlreadyExistsError, NotFoundError

__all__ = ["Client", "Store", "FeedIterator", "FeedBatch", "uuid7", "DEFAULT_URL"]

DEFAULT_URL = "http://127.0.0.1:8080"
"""Where `lance-context dev` listens by default."""

PathLike = Union[str, "os.PathLike[str]"]


def uuid7() -> str:
    """A time-ordered UUID (version 7): 48 bits of Unix milliseconds, 12 bits
    of sub-millisecond time, 62 random bits."""
    ns = time.time_ns()
    ms, sub = divmod(ns, 1_000_000)
    rand_a = sub * 4096 // 1_000_000
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


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


def _drop_none(d: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _feed_query(group: str, limit: int, wait_ms: int, position: Optional[str],
                filters: Mapping[str, Any]) -> Dict[str, str]:
    q = tp.query_params(filters)
    q.update(group=str(group), limit=str(int(limit)), wait_ms=str(int(wait_ms)))
    if position:
        q["position"] = str(position)
    return q


class FeedBatch(list):
    """One batch of a feed: a list of records, with the feed position after
    them (``position``) and the consumer group (``group``)."""

    def __init__(self, records: Iterable[dict], position: str, group: str):
        super().__init__(records)
        self.position = position
        self.group = group

    def __repr__(self) -> str:
        return f"FeedBatch({len(self)} records, position={self.position!r}, group={self.group!r})"


class Client:
    """Client of a lance-context worker (or `lance-context dev`, or anything
    serving the same API).

    base_url: e.g. "http://127.0.0.1:8080" ("http://" is added when absent);
        default: the LC_URL environment variable, else http://127.0.0.1:8080
        (`lance-context dev`).
    token: sent as "Authorization: Bearer <token>" (the server's
        LC_API_TOKEN); default: the LC_API_TOKEN environment variable.
    timeout: seconds per request (a feed long-poll adds its wait).
    retries: how many times an idempotent call is retried after the first
        attempt on a 502/503/504 answer or a connection error, with
        exponential backoff (from `backoff` seconds, at most `max_backoff`)
        and jitter, waiting at least the server's Retry-After. 4xx answers
        are never retried, nor are the calls that are not idempotent
        (create_store, delete_store, create_tag, take_lease, sample,
        create_snapshot, delete_* ...).

    Connections are kept alive, one per thread. Use it as a context manager,
    or call close(), to close them. Errors are typed: see
    lance_context_client.errors.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 30,
        retries: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 30.0,
    ):
        if base_url is None:
            base_url = os.environ.get("LC_URL") or DEFAULT_URL
        if token is None:
            token = os.environ.get("LC_API_TOKEN") or None
        from . import __version__

        self._t = tp.Transport(base_url, token, timeout, retries, backoff, max_backoff,
                               f"lance-context-client-python/{__version__}")

    # -- plumbing ------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._t.base_url

    @property
    def token(self) -> Optional[str]:
        return self._t.token

    @property
    def timeout(self) -> float:
        return self._t.timeout

    @property
    def retries(self) -> int:
        return self._t.retries

    def close(self) -> None:
        """Closes the kept-alive connections (the client stays usable)."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def _json(self, method: str, path: str, payload: Any = None, query: Optional[Mapping[str, Any]] = None,
              idempotent: bool = True, timeout: Optional[float] = None) -> Any:
        return self._t.json(method, path, payload, query=query, idempotent=idempotent, timeout=timeout)

    # -- stores --------------------------------------------------------------

    def health(self) -> dict:
        """{"status": "ok", "role": "worker", "instance_id", "shard_id", ...}; needs no token."""
        return self._json("GET", "/api/v1/health")

    def create_store(self, name: str) -> dict:
        """Creates a store: {"name", "uri", "version"}. An existing one raises
        AlreadyExistsError (409 ALREADY_EXISTS). Not retried. See also
        connect_or_create."""
        return self._json("POST", "/api/v1/rollouts", {"name": name}, idempotent=False)

    def store(self, name: str) -> "Store":
        """A handle on a store, without asking the server anything."""
        return Store(self, name)

    def connect(self, name: str) -> "Store":
        """A handle on an existing store; NotFoundError when there is none."""
        self.stats(name)
        return Store(self, name)

    def connect_or_create(self, name: str) -> "Store":
        """A handle on the store, created first when it does not exist (a
        concurrent creator winning the race is fine)."""
        try:
            self.stats(name)
        except NotFoundError as e:
            if e.route_missing:
                raise
            try:
                self.create_store(name)
            except AlreadyExistsError:
                pass
        return Store(self, name)

    def stores(self) -> List[str]:
        """The names of every store, sorted."""
        return [s["name"] for s in self._json("GET", "/api/v1/rollouts")["stores"]]

    def stats(self, store: str) -> dict:
        """{"name", "uri", "version", "rows", "base_rows", "pending_rows",
        "fragments", "pending_generations", "shards", "unflushed_rows", ...}:
        from manifests only."""
        return self._json("GET", tp.store_path(store))

    def version(self, store: str) -> int:
        """The store's base table version (what LanceDB sees as latest; an
        append does not advance it, a merge does)."""
        return int(self.stats(store)["version"])

    def delete_store(self, store: str) -> None:
        """Removes a store and all its data. Not retried."""
        self._t.request("DELETE", tp.store_path(store), idempotent=False)

    # -- writes --------------------------------------------------------------

    def append(self, store: str, records: Iterable[Mapping[str, Any]], flush: bool = False) -> dict:
        """Makes records (dicts) durable; returns {"version", "ids", "count", "flushed"}.

        Records without an "id" get a UUIDv7 before the first attempt, so a
        retry writes the same ids (the newest write of an id wins). bytes in
        "binary_payload" are base64-encoded; "metadata" may be any JSON value.
        With flush=True the rows are readable on return. The caller's dicts
        are not modified.
        """
        recs = [_prepare(r) for r in records]
        body = json.dumps({"records": recs}).encode("utf-8")
        return self._t.request("POST", tp.store_path(store, "records"), query={"flush": "true"} if flush else None,
                               body=body, content_type=tp.JSON).json()

    def append_payload(self, store: str, record: Mapping[str, Any], payload: Any, flush: bool = False) -> dict:
        """Appends one record whose payload is sent as a multipart part, read
        and sent 1 MiB at a time: bytes, or a binary file object (read from
        its position at the call; it must be seekable for a retry). The
        worker streams a payload larger than its inline size into an object
        of its own (up to LC_MAX_BLOB_BYTES, 1 GiB by default) and fills in
        payload_size and payload_checksum. Returns what append returns."""
        rec = _prepare(record)
        rec.pop("binary_payload", None)
        meta = json.dumps({"records": [rec]}).encode("utf-8")
        boundary = uuid7().replace("-", "")
        start = None if isinstance(payload, (bytes, bytearray, memoryview)) else payload.tell()

        def parts():
            yield (f"--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\n"
                   "Content-Type: application/json\r\n\r\n").encode("ascii") + meta
            yield (f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"0\"; filename=\"payload\"\r\n"
                   "Content-Type: application/octet-stream\r\n\r\n").encode("ascii")
            if start is None:
                view = memoryview(payload)
                for i in range(0, len(view), 1 << 20):
                    yield bytes(view[i:i + (1 << 20)])
            else:
                payload.seek(start)
                while True:
                    chunk = payload.read(1 << 20)
                    if not chunk:
                        break
                    yield chunk
            yield f"\r\n--{boundary}--\r\n".encode("ascii")

        return self._t.request("POST", tp.store_path(store, "records"), query={"flush": "true"} if flush else None,
                               body=parts, content_type="multipart/form-data; boundary=" + boundary).json()

    def add(self, store: str, records: Iterable[Mapping[str, Any]], flush: bool = False) -> dict:
        """The reference's name for append."""
        return self.append(store, records, flush=flush)

    def add_one(self, store: str, record: Mapping[str, Any], flush: bool = False) -> str:
        """Appends one record; returns its id."""
        return self.append(store, [record], flush=flush)["ids"][0]

    def flush(self, store: str) -> dict:
        """Seals the worker's buffered rows so they are readable: {"flushed"}."""
        return self._json("POST", tp.store_path(store, "flush"))

    def merge(self, store: str) -> dict:
        """One merge pass into the base table: {"generations", "rows",
        "replaced", "remaining", "base_version", ...}. Repeat while
        "remaining" > 0."""
        return self._json("POST", tp.store_path(store, "merge"))

    def compact(self, store: str, target_rows_per_fragment: Optional[int] = None,
                materialize_deletions: Optional[bool] = None) -> dict:
        """{"fragments_removed", "fragments_added", "files_removed",
        "files_added", "version"}; CompactionInProgressError while one runs."""
        return self._json("POST", tp.store_path(store, "compact"), _drop_none({
            "target_rows_per_fragment": target_rows_per_fragment, "materialize_deletions": materialize_deletions}))

    def compact_stats(self, store: str) -> dict:
        """{"total_fragments", "is_compacting", "last_compaction",
        "last_error", "total_compactions"}."""
        return self._json("GET", tp.store_path(store, "compact", "stats"))

    def checkout(self, store: str, version: int) -> int:
        """Pins this worker's reads of the store to base version `version`
        (time travel, without the WAL tier, for every reader of this worker);
        the latest version unpins. Returns the version reads now see."""
        return self._json("POST", tp.store_path(store, "checkout"), {"version": version})["version"]

    # -- reads ---------------------------------------------------------------

    def list(self, store: str, source: Optional[str] = None, limit: int = 25, offset: int = 0,
             cursor: Optional[str] = None, **filters: Any) -> dict:
        """One page, in id order: {"records", "has_more", "limit", "offset",
        "source", "next_cursor"}.

        source: "all" (merged and un-merged rows; the worker's default when
        None), "fragments" (the merged base table) or "wal" (flushed, not
        merged). cursor: the previous page's "next_cursor" (following cursors
        returns every row exactly once, merges or not; offsets are for page
        numbers). filters: equality on id, rollout_id, problem_id, dataset,
        role, content_type, policy_version, artifact_type,
        include_in_training (a bool); None values are left out.
        """
        query = tp.query_params(filters)
        query.update(limit=str(limit), offset=str(offset))
        if source:
            query["source"] = source
        if cursor:
            query["cursor"] = cursor
        return self._json("GET", tp.store_path(store, "records"), query=query)

    def iter_records(self, store: str, source: Optional[str] = None, page_size: int = 500,
                     **filters: Any) -> Iterator[dict]:
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

    def get(self, store: str, id: str) -> Optional[dict]:
        """The newest write of a record (without its payload: see blob), or
        None when no record has the id."""
        return self._json("GET", tp.store_path(store, "records", tp.quote(id))).get("record")

    def blob_with_type(self, store: str, id: str) -> Tuple[bytes, str]:
        """A record's payload bytes and content type; NotFoundError when it
        has none."""
        a = self._t.request("GET", tp.store_path(store, "records", tp.quote(id), "blob"), accept="*/*")
        return a.body, a.headers.get("Content-Type", "application/octet-stream")

    def blob(self, store: str, id: str) -> bytes:
        """A record's payload bytes; NotFoundError when it has none."""
        return self.blob_with_type(store, id)[0]

    def download_blob(self, store: str, id: str, out: Any) -> int:
        """Writes a record's payload to the binary file object out, 1 MiB
        at a time (never whole in memory, whatever its size); returns the
        bytes written. NotFoundError when it has none."""
        n = [0]

        def sink(data: bytes) -> None:
            out.write(data)
            n[0] += len(data)

        self._t.request("GET", tp.store_path(store, "records", tp.quote(id), "blob"), accept="*/*", sink=sink)
        return n[0]

    def trajectory(self, store: str, rollout_id: str) -> List[dict]:
        """The records of a rollout ordered by sequence_order, then id."""
        return self._json("GET", tp.store_path(store, "trajectories", tp.quote(rollout_id)))["records"]

    # -- SQL (served by the master and by dev mode) --------------------------

    def query(self, store: str, sql: str, source: Optional[str] = None, arrow: bool = False,
              max_rows: Optional[int] = None) -> Any:
        """Runs one read-only SQL statement where the store is the table
        "records" and other stores are tables of their own names (double-quote
        names with a dot or dash). source: "fragments" (the merged base
        table: the server's default when None), "wal" or "all". Served by
        the master and `lance-context dev`, not by a worker.

        Returns {"columns": [{"name", "type"}], "rows": [[...]], "row_count",
        "truncated", "rows_scanned", "elapsed_ms", "scans"}; with arrow=True,
        the bytes of an Arrow IPC stream. max_rows truncates a result larger
        than the server's row limit instead of raising QueryLimitError.
        """
        payload: Dict[str, Any] = {"sql": sql}
        if source:
            payload["source"] = source
        if max_rows is not None:
            payload["max_rows"] = int(max_rows)
        path = "/api/v1/experiments/" + tp.quote(store) + "/query"
        if arrow:
            return self._t.request("POST", path, body=json.dumps(payload).encode("utf-8"),
                                   content_type=tp.JSON, accept=tp.ARROW_STREAM).body
        return self._json("POST", path, payload)

    # -- lifecycle: cleanup, tags, leases, retention ---------------------------

    def cleanup(self, store: str, older_than_seconds: Optional[int] = None,
                read_grace_seconds: Optional[int] = None, delete_unverified: bool = False) -> dict:
        """Removes old base versions and the files only they reference (what
        tags, leases and pins hold is kept): {"versions_removed",
        "files_removed", "bytes_removed", "versions_kept", ...}."""
        body = _drop_none({"older_than_seconds": older_than_seconds, "read_grace_seconds": read_grace_seconds})
        if delete_unverified:
            body["delete_unverified"] = True
        return self._json("POST", tp.store_path(store, "cleanup"), body)

    def tags(self, store: str) -> List[dict]:
        """The store's tags: [{"name", "version", "manifest_size"}]."""
        return self._json("GET", tp.store_path(store, "tags"))["tags"]

    def create_tag(self, store: str, name: str, version: int = 0) -> dict:
        """Names base version `version` (0: the latest) in Lance's tag
        format, so LanceDB and pylance check it out by name. Not retried."""
        return self._json("POST", tp.store_path(store, "tags"), {"name": name, "version": int(version)}, idempotent=False)

    def tag(self, store: str, name: str) -> dict:
        """One tag; NotFoundError when there is none."""
        return self._json("GET", tp.store_path(store, "tags", tp.quote(name)))

    def delete_tag(self, store: str, name: str) -> None:
        """Removes a tag. Not retried."""
        self._t.request("DELETE", tp.store_path(store, "tags", tp.quote(name)), idempotent=False)

    def leases(self, store: str) -> List[dict]:
        """The store's leases: [{"id", "version", "expires_at", "holder"}]."""
        return self._json("GET", tp.store_path(store, "leases"))["leases"]

    def take_lease(self, store: str, version: int = 0, ttl_seconds: int = 0, holder: Optional[str] = None) -> dict:
        """Keeps base version `version` (0: the latest) from cleanup for
        ttl_seconds (0: an hour): {"id", "version", "expires_at"}. Not
        retried (a retry would take a second lease)."""
        return self._json("POST", tp.store_path(store, "leases"),
                          _drop_none({"version": int(version), "ttl_seconds": int(ttl_seconds), "holder": holder}),
                          idempotent=False)

    def lease(self, store: str, lease_id: str) -> dict:
        """One lease; NotFoundError when there is none (released or expired)."""
        return self._json("GET", tp.store_path(store, "leases", tp.quote(lease_id)))

    def renew_lease(self, store: str, lease_id: str, ttl_seconds: int = 0) -> dict:
        """Extends a lease to ttl_seconds from now (0: an hour)."""
        return self._json("POST", tp.store_path(store, "leases", tp.quote(lease_id), "renew"),
                          {"ttl_seconds": int(ttl_seconds)})

    def release_lease(self, store: str, lease_id: str) -> None:
        """Ends a lease. Not retried."""
        self._t.request("DELETE", tp.store_path(store, "leases", tp.quote(lease_id)), idempotent=False)

    def retention(self, store: str) -> dict:
        """The store's row retention: {"max_age_seconds", "keep_policy_versions"} (0: no bound)."""
        return self._json("GET", tp.store_path(store, "retention"))

    def set_retention(self, store: str, max_age_seconds: int = 0, keep_policy_versions: int = 0) -> dict:
        """Sets the row retention: rows older than max_age_seconds, or whose
        policy_version is not among the newest keep_policy_versions, go at
        the next cleanup (0: no bound)."""
        return self._json("PUT", tp.store_path(store, "retention"),
                          {"max_age_seconds": int(max_age_seconds), "keep_policy_versions": int(keep_policy_versions)})

    # -- snapshots -------------------------------------------------------------

    def create_snapshot(self, store: str, ttl_seconds: Optional[int] = None, holder: Optional[str] = None,
                        **options: Any) -> dict:
        """Makes a base version that holds every row the worker acknowledged
        before the call, named by a tag and kept by a lease, for LanceDB or
        pylance to open: {"id", "uri", "version", "tag", "lease": {"id",
        "expires_at"}, ...}. ttl_seconds: the lease (the server's default
        when None: an hour); further options go into the body as they are.
        Not retried (a retry would make a second snapshot)."""
        body = _drop_none(dict(options, ttl_seconds=ttl_seconds, holder=holder))
        return self._json("POST", tp.store_path(store, "snapshots"), body, idempotent=False)

    def snapshots(self, store: str) -> List[dict]:
        """The store's snapshots."""
        out = self._json("GET", tp.store_path(store, "snapshots"))
        return out["snapshots"] if isinstance(out, dict) and "snapshots" in out else out

    def snapshot(self, store: str, snapshot_id: str) -> dict:
        """One snapshot; NotFoundError when there is none."""
        return self._json("GET", tp.store_path(store, "snapshots", tp.quote(snapshot_id)))

    def renew_snapshot(self, store: str, snapshot_id: str, ttl_seconds: Optional[int] = None) -> dict:
        """Extends a snapshot's lease to ttl_seconds from now (the server's
        default when None)."""
        return self._json("POST", tp.store_path(store, "snapshots", tp.quote(snapshot_id), "renew"),
                          _drop_none({"ttl_seconds": ttl_seconds}))

    def delete_snapshot(self, store: str, snapshot_id: str) -> None:
        """Releases a snapshot. Not retried."""
        self._t.request("DELETE", tp.store_path(store, "snapshots", tp.quote(snapshot_id)), idempotent=False)

    # -- the learner's side: feed, sample, export ------------------------------

    def feed(self, store: str, group: str, limit: int = 256, wait_ms: int = 0,
             position: Optional[str] = None, **filters: Any) -> dict:
        """Rows after the consumer group's committed position (or after
        `position`), in the order they became durable, waiting up to wait_ms
        for the first one: {"records", "position", "count", "group"}. With
        no row within the wait, count is 0 and position unchanged. filters:
        as list takes them (policy_version="v3", role="assistant", ...).
        Nothing is committed: see feed_commit and feed_batches."""
        q = _feed_query(group, limit, wait_ms, position, filters)
        return self._json("GET", tp.store_path(store, "feed"), query=q,
                          timeout=self.timeout + max(0, wait_ms) / 1000.0)

    def feed_commit(self, store: str, group: str, position: str) -> dict:
        """Makes `position` the group's durable position (idempotent):
        {"group", "position", "committed_at"}."""
        return self._json("POST", tp.store_path(store, "feed", "commit"), {"group": group, "position": position})

    def feed_groups(self, store: str) -> List[dict]:
        """The store's consumer groups: [{"group", "position", "committed_at"}]."""
        return self._json("GET", tp.store_path(store, "feed", "groups"))["groups"]

    def feed_group(self, store: str, group: str) -> dict:
        """One consumer group: {"group", "position", "committed_at"}."""
        return self._json("GET", tp.store_path(store, "feed", "groups", tp.quote(group)))

    def delete_feed_group(self, store: str, group: str) -> None:
        """Forgets a consumer group (it starts at the beginning again). Not retried."""
        self._t.request("DELETE", tp.store_path(store, "feed", "groups", tp.quote(group)), idempotent=False)

    def feed_batches(self, store: str, group: str, batch_size: int = 256, wait_ms: int = 1000,
                     position: Optional[str] = None, stop_when_idle: bool = False, **filters: Any) -> "FeedIterator":
        """An iterator of FeedBatch (lists of records) for a consumer group
        that commits as it goes: batch k's position is committed when batch
        k+1 is asked for, and the last batch's when the iterator is closed
        (close(), or leaving its `with` block without an exception). See
        FeedIterator."""
        return FeedIterator(self, store, group, batch_size=batch_size, wait_ms=wait_ms, position=position,
                            stop_when_idle=stop_when_idle, filters=filters)

    def sample(self, store: str, n: int = 16, **options: Any) -> dict:
        """Samples n groups of complete trajectories: {"groups": [{"key",
        "records"}]}. options go into the body as they are (None values left
        out): group_by ("problem_id"), policy_versions ({"last": K} or
        {"in": [...]}), drop_zero_variance, max_times_sampled, group (the
        consumer group), seed, and whatever else the server takes. Not
        retried (a served sample counts against max_times_sampled)."""
        body = _drop_none(options)
        body["n"] = int(n)
        return self._json("POST", tp.store_path(store, "sample"), body, idempotent=False)

    def export(self, store: str, path: Union[PathLike, Any], source: Optional[str] = None,
               columns: Optional[Iterable[str]] = None, filters: Optional[Mapping[str, Any]] = None,
               chunk_size: int = 1 << 20, format: Optional[str] = None, **params: Any) -> int:
        """Streams the store's rows as an Arrow IPC stream, or with
        format="parquet" as one Parquet file (encoded by the server, zstd),
        into `path` (a file name, written to a temporary file beside it and
        renamed when complete, or a binary file object), chunk by chunk: the
        body is never held in memory. Returns the bytes written.

        source: "all", "fragments" or "wal"; columns: the columns to export
        (all when None); filters: equality filters as list takes them;
        format: "arrow" (the default) or "parquet"; params: further query
        parameters as they are (snapshot="tag" or a version number: the
        store as it was then). Retried from the start on 502/503/504 and
        connection errors (a file object only until its first byte).
        """
        q = tp.query_params(filters or {})
        q.update(tp.query_params(params))
        accept = tp.ARROW_STREAM
        if format:
            q["format"] = format
            if format == "parquet":
                accept = tp.PARQUET
        if source:
            q["source"] = source
        if columns is not None:
            cols = [columns] if isinstance(columns, str) else list(columns)
            q["columns"] = ",".join(cols)
        target = tp.store_path(store, "export")
        if hasattr(path, "write"):
            n = [0]

            def sink(data: bytes) -> None:
                path.write(data)
                n[0] += len(data)

            self._t.request("GET", target, query=q, accept=accept, sink=sink, chunk=chunk_size)
            return n[0]
        dest = os.fspath(path)
        fd, tmp = tempfile.mkstemp(prefix=".export-", suffix=".part", dir=os.path.dirname(os.path.abspath(dest)))
        try:
            with os.fdopen(fd, "wb") as f:
                written = [0]

                def sink(data: bytes) -> None:
                    f.write(data)
                    written[0] += len(data)

                def restart() -> None:
                    f.seek(0)
                    f.truncate()
                    written[0] = 0

                self._t.request("GET", target, query=q, accept=accept, sink=sink, restart=restart,
                                chunk=chunk_size)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dest)
            return written[0]
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


class FeedIterator:
    """Batches of a consumer group's feed, committing as it goes.

    Iterating asks the server for the rows after the group's position
    (waiting up to wait_ms each time; empty answers are not yielded) and
    yields each non-empty answer as a FeedBatch. Asking for batch k+1
    commits batch k's position first, so a learner that crashes while
    training on a batch gets that batch again after a restart, and never one
    it finished. close() (or leaving a `with` block normally, or `break` out
    of the loop inside it) commits the last batch; leaving the block by an
    exception does not (that batch is delivered again). commit() commits
    the batch in hand at once.

    stop_when_idle: end the iteration at the first answer with no rows
    (caught up) instead of waiting for more.
    """

    def __init__(self, client: Client, store: str, group: str, batch_size: int = 256, wait_ms: int = 1000,
                 position: Optional[str] = None, stop_when_idle: bool = False,
                 filters: Optional[Mapping[str, Any]] = None):
        self.client = client
        self.store = store
        self.group = group
        self.batch_size = batch_size
        self.wait_ms = wait_ms
        self.stop_when_idle = stop_when_idle
        self.filters = dict(filters or {})
        self.position = position  # where the next read starts (None: the group's committed position)
        self.uncommitted: Optional[str] = None  # the position of the batch in hand
        self.closed = False

    def __iter__(self) -> "FeedIterator":
        return self

    def __next__(self) -> FeedBatch:
        if self.closed:
            raise StopIteration
        self.commit()
        while True:
            ans = self.client.feed(self.store, self.group, limit=self.batch_size, wait_ms=self.wait_ms,
                                   position=self.position, **self.filters)
            before, self.position = self.position, ans.get("position") or self.position
            recs = ans.get("records") or []
            if recs or (before is not None and self.position != before):
                # A position moved without rows (past rows the filters passed
                # over) is committed with the next batch, or at close.
                self.uncommitted = self.position
            if recs:
                return FeedBatch(recs, self.position, self.group)
            if self.stop_when_idle:
                self.closed = True
                raise StopIteration

    def commit(self) -> Optional[dict]:
        """Commits the batch in hand (if any): the server's answer, or None."""
        if self.uncommitted is None:
            return None
        out = self.client.feed_commit(self.store, self.group, self.uncommitted)
        self.uncommitted = None
        return out

    def close(self) -> None:
        """Commits the batch in hand and ends the iteration."""
        self.commit()
        self.closed = True

    def __enter__(self) -> "FeedIterator":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.uncommitted = None  # the batch in hand may not have been used: it comes again
            self.closed = True


# The methods of Client that take the store name first: a Store has each of
# them without it.
STORE_METHODS = (
    "stats", "version", "delete_store", "append", "add", "add_one", "flush", "merge", "compact", "compact_stats",
    "checkout", "list", "iter_records", "get", "blob_with_type", "blob", "download_blob", "append_payload",
    "trajectory", "query", "cleanup", "tags",
    "create_tag", "tag", "delete_tag", "leases", "take_lease", "lease", "renew_lease", "release_lease", "retention",
    "set_retention", "create_snapshot", "snapshots", "snapshot", "renew_snapshot", "delete_snapshot", "feed",
    "feed_commit", "feed_groups", "feed_group", "delete_feed_group", "feed_batches", "sample", "export",
)


def _bind(name: str, of: type):
    fn = getattr(of, name)

    def method(self, *args, **kwargs):
        return getattr(self.client, name)(self.name, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = "Store." + name
    method.__doc__ = fn.__doc__
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    method.__signature__ = sig.replace(parameters=params[:1] + params[2:])  # without store
    return method


class Store:
    """A store of a Client: the Client's per-store methods without the store
    argument (store.add(records), store.get(id), store.version(), ...)."""

    def __init__(self, client: Client, name: str):
        self.client = client
        self.name = name

    def __repr__(self) -> str:
        return f"Store({self.name!r} at {self.client.base_url})"


for _name in STORE_METHODS:
    setattr(Store, _name, _bind(_name, Client))
del _name
