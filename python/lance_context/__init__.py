"""Python client of lance-context, a durable store for reinforcement-learning
rollouts. Standard library only.

    from lance_context import Client, LanceContextError

    lc = Client("http://127.0.0.1:8080")
    lc.append("runs", [{"rollout_id": "r1", "content": "hi"}], flush=True)
"""

from .client import Client, LanceContextError, uuid7

__all__ = ["Client", "LanceContextError", "uuid7"]
__version__ = "0.1.0"
