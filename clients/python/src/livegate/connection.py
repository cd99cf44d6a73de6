# Licensed under the Apache License, Version 2.0.
"""One connection to livegated over its Unix socket (asyncio): JSON-RPC requests answered by id, notifications
routed to the token they name. It ends with the socket; :class:`livegate.aio.Client` reconnects."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

from .errors import ConnectionRefused, DaemonUnavailable, LiveGateError, error_from

DEFAULT_SOCKET = "/run/livegate/livegate.sock"
PROTOCOL_VERSION = 1
# The daemon's notifications are one line each; a window of 100 pages of 100 large objects is big.
MAX_LINE_BYTES = 256 * 1024 * 1024

NotificationHandler = Callable[[str, dict[str, Any]], None]


def socket_path(explicit: str | None = None) -> str:
    """One rule for every client: the socket given, else ``$LIVEGATE_SOCKET``, else the system daemon's."""
    return explicit or os.environ.get("LIVEGATE_SOCKET") or DEFAULT_SOCKET


class Connection:
    """A connection to livegated. Use :meth:`open`; :meth:`close` or the daemon ends it."""

    def __init__(self, path: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.path = path
        self._reader = reader
        self._writer = writer
        self._next_id = 0
        self._pending: dict[int, tuple[asyncio.Future[Any], Callable[[Any], None] | None]] = {}
        self._tokens: dict[int, NotificationHandler] = {}
        self._session_handlers: list[Callable[[dict[str, Any]], None]] = []
        self._closing: LiveGateError | None = None
        self._closed = asyncio.Event()
        self.hello: dict[str, Any] = {}
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def open(cls, path: str | None = None, client: str = "python", timeout: float = 10.0) -> Connection:
        """Connects and says ``hello``. Raises :class:`DaemonUnavailable` when the daemon cannot be reached, and
        :class:`ConnectionRefused` when it refuses this client (``connection.closing`` instead of an answer)."""
        path = socket_path(path)
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path, limit=MAX_LINE_BYTES), timeout)
        except (OSError, asyncio.TimeoutError) as error:
            raise DaemonUnavailable(f"livegated at {path} is not reachable: {error or 'timed out'}") from None
        connection = cls(path, reader, writer)
        try:
            connection.hello = await asyncio.wait_for(
                connection.request("hello", {"client": client, "protocol": PROTOCOL_VERSION}), timeout
            )
        except BaseException:
            connection.close()
            raise
        return connection

    @property
    def is_closed(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def close(self) -> None:
        if not self._writer.is_closing():
            self._writer.close()
        self._task.cancel()
        self._finish(DaemonUnavailable("the connection to livegated was closed"))

    @property
    def error(self) -> LiveGateError | None:
        """Why the connection ended (the daemon's ``connection.closing``, or the loss), once it has."""
        return self._closing if self._closed.is_set() else None

    def on_session_changed(self, handler: Callable[[dict[str, Any]], None]) -> None:
        self._session_handlers.append(handler)

    def route(self, token: int, handler: NotificationHandler | None) -> None:
        """Sends ``token``'s notifications to ``handler`` (``None``: nowhere)."""
        if handler is None:
            self._tokens.pop(token, None)
        else:
            self._tokens[token] = handler

    async def request(
        self, method: str, params: dict[str, Any] | None = None, on_answer: Callable[[Any], None] | None = None
    ) -> Any:
        """Sends a request and returns its result, or raises the daemon's error as a :class:`LiveGateError`.
        ``on_answer(result)`` runs as the answer is read, before any later notification is routed (so a token's
        handler is in place for its first notification)."""
        if self._closed.is_set():
            raise self._closing or DaemonUnavailable("the connection to livegated is closed")
        self._next_id += 1
        request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (future, on_answer)
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n"
        try:
            self._writer.write(line.encode())
            await self._writer.drain()
        except (OSError, RuntimeError) as error:
            self._pending.pop(request_id, None)
            self._finish(DaemonUnavailable(f"livegated at {self.path} went away: {error}"))
            raise self._closing or DaemonUnavailable("the connection to livegated is closed") from None
        return await future

    async def _read(self) -> None:
        reason: LiveGateError = DaemonUnavailable(f"livegated at {self.path} closed the connection")
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                if not line.strip():
                    continue
                self._dispatch(json.loads(line))
        except asyncio.CancelledError:
            pass
        except (OSError, ValueError) as error:
            reason = DaemonUnavailable(f"the connection to livegated at {self.path} failed: {error}")
        self._finish(self._closing or reason)
        if not self._writer.is_closing():
            self._writer.close()

    def _dispatch(self, message: Any) -> None:
        if isinstance(message, list):
            for member in message:
                self._dispatch(member)
            return
        if not isinstance(message, dict):
            return
        if "id" in message and "method" not in message:
            entry = self._pending.pop(message["id"], None) if isinstance(message["id"], int) else None
            if entry is None:
                return
            future, on_answer = entry
            if future.done():
                return
            if "error" in message:
                future.set_exception(error_from(message["error"]))
                return
            result = message.get("result")
            if on_answer is not None:
                on_answer(result)
            future.set_result(result)
            return
        method = message.get("method")
        params = message.get("params")
        if not isinstance(params, dict):
            return
        if method == "connection.closing":
            error = error_from(params)
            self._closing = ConnectionRefused(error.message, error.code, error.data) if not self.hello else error
            return
        if method == "session.changed":
            for handler in list(self._session_handlers):
                handler(params)
            return
        token = params.get("token")
        route = self._tokens.get(token) if isinstance(token, int) else None
        if route is not None and isinstance(method, str):
            route(method, params)

    def _finish(self, reason: LiveGateError) -> None:
        if self._closed.is_set():
            return
        self._closing = self._closing or reason
        self._closed.set()
        pending, self._pending = self._pending, {}
        for future, _ in pending.values():
            if not future.done():
                future.set_exception(self._closing)
        self._tokens.clear()
