# Licensed under the Apache License, Version 2.0.
"""Errors: the daemon's JSON-RPC errors as exceptions carrying its code, message and data."""

from __future__ import annotations

from typing import Any


class LiveGateError(Exception):
    """An error from livegated (``code`` is its stable JSON-RPC code) or from this client (``code`` is None)."""

    code: int | None = None

    def __init__(self, message: str, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.data = data

    def __str__(self) -> str:
        return self.message if self.code is None else f"{self.message} ({self.code})"


class ParseError(LiveGateError):
    code = -32700


class InvalidRequest(LiveGateError):
    code = -32600


class MethodNotFound(LiveGateError):
    code = -32601


class InvalidParams(LiveGateError):
    code = -32602


class InternalError(LiveGateError):
    code = -32603


class UnknownToken(LiveGateError):
    code = -32001


class NotPermitted(LiveGateError):
    """The peer's credentials, or the cloud's permissions, do not allow it: ask an administrator."""

    code = -32002


class LimitExceeded(LiveGateError):
    """A limit was exceeded; ``limit`` names it (``data.limit``)."""

    code = -32003

    @property
    def limit(self) -> str | None:
        return self.data.get("limit") if isinstance(self.data, dict) else None


class CloudUnavailable(LiveGateError):
    code = -32004


class VersionConflict(LiveGateError):
    """``if_version`` did not match; ``current_version`` is the stored version."""

    code = -32005

    @property
    def current_version(self) -> int | None:
        return self.data.get("currentVersion") if isinstance(self.data, dict) else None


class NotFound(LiveGateError):
    code = -32006


class UnsupportedProtocol(LiveGateError):
    code = -32007


class StorageFailure(LiveGateError):
    """The daemon's state directory failed (``reason``: full, readOnly, ioError, damaged); nothing was queued."""

    code = -32008

    @property
    def reason(self) -> str | None:
        return self.data.get("reason") if isinstance(self.data, dict) else None


class DaemonUnavailable(LiveGateError):
    """No connection to livegated: it is not running, or it went away and did not come back in time."""


class ConnectionRefused(LiveGateError):
    """The daemon refused this client when it connected (its access policy or its connection limit); ``code`` says
    which (-32002 or -32003). Connecting again will not help until an administrator changes something."""


class ChangeSetMismatch(LiveGateError):
    """A ``collection.changed`` notification did not fit the window this client holds."""


_BY_CODE: dict[int, type[LiveGateError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        UnknownToken,
        NotPermitted,
        LimitExceeded,
        CloudUnavailable,
        VersionConflict,
        NotFound,
        UnsupportedProtocol,
        StorageFailure,
    )
    if cls.code is not None
}


def error_from(error: Any) -> LiveGateError:
    """The exception for a JSON-RPC error object (``{"code", "message", "data"?}``)."""
    if not isinstance(error, dict):
        return InternalError(f"the daemon sent a malformed error: {error!r}")
    code = error.get("code")
    message = str(error.get("message", "error"))
    cls = _BY_CODE.get(code) if isinstance(code, int) else None
    if cls is None:
        return LiveGateError(message, code if isinstance(code, int) else None, error.get("data"))
    return cls(message, None, error.get("data"))
