"""Python client of lance-context, a durable store for reinforcement-learning
rollouts (a Go re-implementation of beinan/lance-context). Standard library
only; sync and asyncio.

    from lance_context_client import Client

    lc = Client()                      # LC_URL, else http://127.0.0.1:8080
    store = lc.connect_or_create("runs")
    store.add([{"rollout_id": "r1", "content": "hi"}], flush=True)

The distribution is lance-context-client and the import name
lance_context_client, so it installs beside the reference system's own
Python package without colliding with it.
"""

__version__ = "0.2.0"

from .aio import AsyncClient, AsyncFeedIterator, AsyncStore  # noqa: E402
from .client import DEFAULT_URL, Client, FeedBatch, FeedIterator, Store, uuid7  # noqa: E402
from .errors import *  # noqa: E402,F401,F403
from .errors import __all__ as _errors_all  # noqa: E402

__all__ = [
    "Client", "Store", "FeedIterator", "FeedBatch", "AsyncClient", "AsyncStore", "AsyncFeedIterator",
    "uuid7", "DEFAULT_URL", "__version__",
] + list(_errors_all)
