"""The asyncio client: the same methods as Client, as coroutines.

Standard library only: each call runs the synchronous client's code (http.client
with keep-alive connections, the same retries and typed errors) on a thread
pool of the client's own, so the event loop never blocks, and both clients
behave alike by construction. A cancelled call stops waiting at once; its
request runs to its end (at most its timeout, plus a feed's wait) in the
background.

    async with AsyncClient() as lc:
        store = await lc.connect_or_create("grpo-run-42")
        await store.add([{"rollout_id": "r1", "content": "hi"}], flush=True)
        async with store.feed_batches("learner") as feed:
            async for batch in feed:
                ...
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Mapping, Optional

from .client import STORE_METHODS, Client, FeedBatch

__all__ = ["AsyncClient", "AsyncStore", "AsyncFeedIterator"]

# Client methods that become coroutines of AsyncClient as they are.
_PLAIN = (
    "health", "create_store", "stores", "stats", "version", "delete_store", "append", "add", "add_one", "flush",
    "merge", "compact", "compact_stats", "checkout", "list", "get", "blob_with_type", "blob", "download_blob",
    "append_payload", "trajectory",
    "query", "cleanup", "tags", "create_tag", "tag", "delete_tag", "leases", "take_lease", "lease",
    "renew_lease", "release_lease", "retention", "set_retention", "create_snapshot", "snapshots", "snapshot",
    "renew_snapshot", "delete_snapshot", "feed", "feed_commit", "feed_groups", "feed_group",
    "delete_feed_group", "sample", "export",
)


def _coroutine_of(name: str):
    fn = getattr(Client, name)

    async def method(self, *args, **kwargs):
        return await self._run(getattr(self._sync, name), *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = "AsyncClient." + name
    method.__doc__ = fn.__doc__
    method.__signature__ = inspect.signature(fn)
    return method


class AsyncClient:
    """The asyncio twin of Client: the same constructor and methods, each a
    coroutine (iter_records is an async generator, feed_batches an async
    iterator, store() a plain call). max_workers bounds the requests in
    flight at once (each waits on a thread of the client's pool).

    Use `async with AsyncClient(...) as lc:` or `await lc.close()`.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 30,
        retries: int = 5,
        backoff: float = 0.2,
        max_backoff: float = 30.0,
        max_workers: int = 16,
    ):
        self._sync = Client(base_url, token=token, timeout=timeout, retries=retries, backoff=backoff,
                            max_backoff=max_backoff)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="lance-context-client")

    @property
    def base_url(self) -> str:
        return self._sync.base_url

    @property
    def token(self) -> Optional[str]:
        return self._sync.token

    @property
    def timeout(self) -> float:
        return self._sync.timeout

    @property
    def retries(self) -> int:
        return self._sync.retries

    @property
    def sync(self) -> Client:
        """The synchronous client underneath (same connection settings)."""
        return self._sync

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def close(self) -> None:
        """Closes the connections and the thread pool; the client is unusable after."""
        self._pool.shutdown(wait=False)
        self._sync.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self.base_url!r})"

    def store(self, name: str) -> "AsyncStore":
        """A handle on a store, without asking the server anything."""
        return AsyncStore(self, name)

    async def connect(self, name: str) -> "AsyncStore":
        """A handle on an existing store; NotFoundError when there is none."""
        await self._run(self._sync.connect, name)
        return AsyncStore(self, name)

    async def connect_or_create(self, name: str) -> "AsyncStore":
        """A handle on the store, created first when it does not exist."""
        await self._run(self._sync.connect_or_create, name)
        return AsyncStore(self, name)

    async def iter_records(self, store: str, source: Optional[str] = None, page_size: int = 500,
                           **filters: Any) -> AsyncIterator[dict]:
        """Yields every matching record, following cursors page by page
        (see Client.iter_records)."""
        cursor = None
        while True:
            page = await self.list(store, source=source, limit=page_size, cursor=cursor, **filters)
            for rec in page["records"]:
                yield rec
            cursor = page.get("next_cursor")
            if not page["has_more"] or not cursor:
                return

    def feed_batches(self, store: str, group: str, batch_size: int = 256, wait_ms: int = 1000,
                     position: Optional[str] = None, stop_when_idle: bool = False,
                     **filters: Any) -> "AsyncFeedIterator":
        """An async iterator of FeedBatch that commits as it goes (see
        Client.feed_batches): `async with lc.feed_batches(store, group) as
        feed: async for batch in feed: ...`."""
        return AsyncFeedIterator(self, store, group, batch_size=batch_size, wait_ms=wait_ms, position=position,
                                 stop_when_idle=stop_when_idle, filters=filters)


for _name in _PLAIN:
    setattr(AsyncClient, _name, _coroutine_of(_name))
del _name


class AsyncFeedIterator:
    """The asyncio twin of FeedIterator: `async for`, `async with`,
    `await commit()`, `await close()`; the same commit rules."""

    def __init__(self, client: AsyncClient, store: str, group: str, batch_size: int = 256, wait_ms: int = 1000,
                 position: Optional[str] = None, stop_when_idle: bool = False,
                 filters: Optional[Mapping[str, Any]] = None):
        self.client = client
        self.store = store
        self.group = group
        self.batch_size = batch_size
        self.wait_ms = wait_ms
        self.stop_when_idle = stop_when_idle
        self.filters = dict(filters or {})
        self.position = position
        self.uncommitted: Optional[str] = None
        self.closed = False

    def __aiter__(self) -> "AsyncFeedIterator":
        return self

    async def __anext__(self) -> FeedBatch:
        if self.closed:
            raise StopAsyncIteration
        await self.commit()
        while True:
            ans = await self.client.feed(self.store, self.group, limit=self.batch_size, wait_ms=self.wait_ms,
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
                raise StopAsyncIteration

    async def commit(self) -> Optional[dict]:
        """Commits the batch in hand (if any): the server's answer, or None."""
        if self.uncommitted is None:
            return None
        out = await self.client.feed_commit(self.store, self.group, self.uncommitted)
        self.uncommitted = None
        return out

    async def close(self) -> None:
        """Commits the batch in hand and ends the iteration."""
        await self.commit()
        self.closed = True

    aclose = close

    async def __aenter__(self) -> "AsyncFeedIterator":
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self.close()
        else:
            self.uncommitted = None  # the batch in hand may not have been used: it comes again
            self.closed = True


def _bind_async(name: str):
    fn = getattr(AsyncClient, name)
    is_coro = inspect.iscoroutinefunction(fn)

    if is_coro:
        async def method(self, *args, **kwargs):
            return await getattr(self.client, name)(self.name, *args, **kwargs)
    else:
        def method(self, *args, **kwargs):  # type: ignore[misc]
            return getattr(self.client, name)(self.name, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = "AsyncStore." + name
    method.__doc__ = fn.__doc__
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    method.__signature__ = sig.replace(parameters=params[:1] + params[2:])
    return method


class AsyncStore:
    """A store of an AsyncClient: its per-store methods without the store
    argument (await store.add(records), await store.get(id), ...)."""

    def __init__(self, client: AsyncClient, name: str):
        self.client = client
        self.name = name

    def __repr__(self) -> str:
        return f"AsyncStore({self.name!r} at {self.client.base_url})"


for _name in STORE_METHODS:
    setattr(AsyncStore, _name, _bind_async(_name))
del _name
