# Licensed under the Apache License, Version 2.0.
"""The Python client of livegated, the host's live-data daemon (Protocol/ipc/README.md).

``livegate.Client`` is the blocking client; ``livegate.aio.Client`` the asyncio one. Both reconnect when the daemon
restarts and observe again from what they had, apply and check every collection change, and raise the daemon's
errors as exceptions carrying its code and message. Only the standard library is used."""

from . import aio
from .blocking import BlockingCollection, BlockingObservation, Client
from .changeset import ChangeSet
from .connection import DEFAULT_SOCKET, Connection, socket_path
from .errors import (
    ChangeSetMismatch,
    CloudUnavailable,
    ConnectionRefused,
    DaemonUnavailable,
    InternalError,
    InvalidParams,
    InvalidRequest,
    LimitExceeded,
    LiveGateError,
    MethodNotFound,
    NotFound,
    NotPermitted,
    ParseError,
    StorageFailure,
    UnknownToken,
    UnsupportedProtocol,
    VersionConflict,
)
from .states import CollectionState, DataStatus, FeedEvent, LinkEvent, LoadingStatus, ObjectState, Snapshot, StreamEvent

__version__ = "0.1.0"

__all__ = [
    "aio",
    "BlockingCollection",
    "BlockingObservation",
    "ChangeSet",
    "ChangeSetMismatch",
    "Client",
    "CloudUnavailable",
    "CollectionState",
    "DataStatus",
    "Connection",
    "ConnectionRefused",
    "DaemonUnavailable",
    "DEFAULT_SOCKET",
    "FeedEvent",
    "InternalError",
    "InvalidParams",
    "InvalidRequest",
    "LimitExceeded",
    "LinkEvent",
    "LiveGateError",
    "LoadingStatus",
    "MethodNotFound",
    "NotFound",
    "NotPermitted",
    "ObjectState",
    "ParseError",
    "Snapshot",
    "StorageFailure",
    "StreamEvent",
    "UnknownToken",
    "UnsupportedProtocol",
    "VersionConflict",
    "socket_path",
]
