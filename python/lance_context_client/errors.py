"""Typed errors of the lance-context API.

Every error answer of a worker, master or dev server is the JSON envelope
``{"error": {"code": "NOT_FOUND", "message": "..."}}`` with a stable
upper-case code. The client raises one exception class per code, all under
:class:`LanceContextError`, so a training loop can catch exactly what it
handles::

    try:
        lc.create_store("grpo-run-42")
    except AlreadyExistsError:
        pass

Each exception carries ``status`` (the HTTP status; 0 when no answer
arrived), ``code`` (the envelope's code, ``"CONNECTION_ERROR"`` when no
answer arrived, ``""`` when the body was not the envelope, e.g. a proxy's
error page), ``message`` and ``retry_after`` (the server's Retry-After in
seconds, or None).
"""

from __future__ import annotations

from typing import Dict, Optional, Type

__all__ = [
    "LanceContextError",
    "NotFoundError",
    "AlreadyExistsError",
    "InvalidRequestError",
    "InternalError",
    "CompactionInProgressError",
    "ConflictError",
    "OverloadedError",
    "UnauthorizedError",
    "MethodNotAllowedError",
    "PayloadTooLargeError",
    "UnsupportedMediaTypeError",
    "UnavailableError",
    "RequestTimeoutError",
    "StorageUnavailableError",
    "WALCorruptError",
    "QueryLimitError",
    "NotImplementedOnServerError",
    "InsufficientStorageError",
    "ShardClaimedElsewhereError",
    "ConnectionFailedError",
    "ERROR_CLASSES",
    "error_for",
]


class LanceContextError(Exception):
    """An error answer of the API, or a request that could not be sent.

    status: the HTTP status, 0 when no answer arrived.
    code: the stable code of the error envelope ("NOT_FOUND",
        "ALREADY_EXISTS", ...); "CONNECTION_ERROR" when no answer arrived;
        "" when the body was not the envelope.
    message: what went wrong, usually with what to do.
    retry_after: the server's Retry-After in seconds, or None.
    """

    code_name: str = ""  # the code a subclass stands for

    def __init__(self, status: int, code: str, message: str, retry_after: Optional[float] = None):
        super().__init__(status, code, message, retry_after)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.status} {self.code or 'error'}: {self.message}"

    def __reduce__(self):  # picklable across processes (multiprocessing data loaders)
        return (type(self), (self.status, self.code, self.message, self.retry_after))


class NotFoundError(LanceContextError):
    """404 NOT_FOUND: no such store, record, tag, lease, consumer group... or
    no such route (route_missing: the server predates the route)."""

    code_name = "NOT_FOUND"

    @property
    def route_missing(self) -> bool:
        """True when the server has no such route at all (an older server),
        not when the route exists and the thing it names does not."""
        return self.message.startswith("no route ")


class AlreadyExistsError(LanceContextError):
    """409 ALREADY_EXISTS: a store (or tag) of that name exists."""

    code_name = "ALREADY_EXISTS"


class InvalidRequestError(LanceContextError):
    """400 INVALID_REQUEST: the message says what to fix."""

    code_name = "INVALID_REQUEST"


class InternalError(LanceContextError):
    """500 INTERNAL."""

    code_name = "INTERNAL"


class CompactionInProgressError(LanceContextError):
    """409 COMPACTION_IN_PROGRESS: retry when it ends."""

    code_name = "COMPACTION_IN_PROGRESS"


class ConflictError(LanceContextError):
    """409 CONFLICT: a concurrent change got in the way; retry."""

    code_name = "CONFLICT"


class OverloadedError(LanceContextError):
    """503 OVERLOADED (with Retry-After): too many pending generations;
    merge, then retry."""

    code_name = "OVERLOADED"


class UnauthorizedError(LanceContextError):
    """401 UNAUTHORIZED: missing or wrong bearer token (LC_API_TOKEN)."""

    code_name = "UNAUTHORIZED"


class MethodNotAllowedError(LanceContextError):
    """405 METHOD_NOT_ALLOWED."""

    code_name = "METHOD_NOT_ALLOWED"


class PayloadTooLargeError(LanceContextError):
    """413 PAYLOAD_TOO_LARGE: send smaller batches."""

    code_name = "PAYLOAD_TOO_LARGE"


class UnsupportedMediaTypeError(LanceContextError):
    """415 UNSUPPORTED_MEDIA_TYPE."""

    code_name = "UNSUPPORTED_MEDIA_TYPE"


class UnavailableError(LanceContextError):
    """503 UNAVAILABLE (with Retry-After): a fenced or closing writer."""

    code_name = "UNAVAILABLE"


class RequestTimeoutError(LanceContextError):
    """503 TIMEOUT (with Retry-After): the request timed out on the server."""

    code_name = "TIMEOUT"


class StorageUnavailableError(LanceContextError):
    """503 STORAGE_UNAVAILABLE (with Retry-After): the object store failed."""

    code_name = "STORAGE_UNAVAILABLE"


class WALCorruptError(LanceContextError):
    """503 WAL_CORRUPT: the store's WAL is damaged; the message names where
    and the repair command."""

    code_name = "WAL_CORRUPT"


class QueryLimitError(LanceContextError):
    """422 QUERY_LIMIT: a SQL query hit a limit; the message names it."""

    code_name = "QUERY_LIMIT"


class NotImplementedOnServerError(LanceContextError):
    """501 NOT_IMPLEMENTED: e.g. SQL on a binary built without it."""

    code_name = "NOT_IMPLEMENTED"


class InsufficientStorageError(LanceContextError):
    """507 INSUFFICIENT_STORAGE (with Retry-After): the disk or quota is
    full; nothing was stored."""

    code_name = "INSUFFICIENT_STORAGE"


class ShardClaimedElsewhereError(LanceContextError):
    """503 SHARD_CLAIMED_ELSEWHERE (with Retry-After): another live process
    runs with this worker's instance id."""

    code_name = "SHARD_CLAIMED_ELSEWHERE"


class ConnectionFailedError(LanceContextError):
    """No answer arrived (connection refused or reset, timeout): status 0,
    code "CONNECTION_ERROR". The client's own code, not the server's."""

    code_name = "CONNECTION_ERROR"


ERROR_CLASSES: Dict[str, Type[LanceContextError]] = {
    cls.code_name: cls
    for cls in (
        NotFoundError, AlreadyExistsError, InvalidRequestError, InternalError, CompactionInProgressError,
        ConflictError, OverloadedError, UnauthorizedError, MethodNotAllowedError, PayloadTooLargeError,
        UnsupportedMediaTypeError, UnavailableError, RequestTimeoutError, StorageUnavailableError,
        WALCorruptError, QueryLimitError, NotImplementedOnServerError, InsufficientStorageError,
        ShardClaimedElsewhereError,
    )
}
"""The server's error codes (api/errors.go) and their classes."""


def error_for(status: int, code: str, message: str, retry_after: Optional[float] = None) -> LanceContextError:
    """The exception for an error answer: the class of its code, or
    LanceContextError itself for a code this client does not know (a newer
    server) or a body that was not the envelope."""
    cls = ERROR_CLASSES.get(code, LanceContextError)
    return cls(status, code, message, retry_after)
