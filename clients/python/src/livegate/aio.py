# Licensed under the Apache License, Version 2.0.
"""The asyncio client of livegated.

.. code-block:: python

    import asyncio, livegate.aio

    async def main():
        async with await livegate.aio.Client.connect(client="my-tool") as daemon:
            async with await daemon.observe_object("notes", "n1") as note:
                async for state in note:
                    print(state.version, state.data, state.loading_status)

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import os
import random
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from .connection import Connection, socket_path
from .errors import ConnectionRefused, DaemonUnavailable, LiveGateError
from .observations import Feed, LiveCollection, LiveObject, Observation, StreamListener, _background
from .states import LinkEvent, Snapshot

__all__ = ["Client", "Connection"]

O = TypeVar("O", bound=Observation[Any])


class Client:
    """A client of livegated that outlives the daemon: it holds one connection, and when the daemon restarts (or
    the connection is lost) it reconnects with backoff (0.1 s doubling to 5 s, with jitter) and makes every live
    observation again on the new connection.

    Requests made while the daemon is away wait for it up to ``request_wait`` seconds, then raise
    :class:`DaemonUnavailable`. A request whose connection is lost while it is on its way raises
    :class:`DaemonUnavailable` too: a write may or may not have reached the daemon's outbox then."""

    def __init__(self, socket: str | None = None, client: str = "python", request_wait: float = 10.0) -> None:
        self.socket_path = socket_path(socket)
        self.name = client
        self.request_wait = request_wait
        self._connection: Connection | None = None
        self._changed = asyncio.Event()
        self._closed = False
        self._failure: LiveGateError | None = None
        self._observations: weakref.WeakSet[Observation[Any]] = weakref.WeakSet()
        self._task: asyncio.Task[None] | None = None
        self._link_listeners: list[Callable[[LinkEvent], None]] = []
        self._session_watched: weakref.WeakSet[Connection] = weakref.WeakSet()

    @classmethod
    async def connect(
        cls, socket: str | None = None, client: str = "python", timeout: float = 10.0, request_wait: float = 10.0
    ) -> Client:
        """A client connected to the daemon. Raises :class:`DaemonUnavailable` when no connection is made within
        ``timeout`` seconds, and :class:`ConnectionRefused` at once when the daemon refuses this client."""
        daemon = cls(socket, client, request_wait)
        if not os.path.exists(daemon.socket_path):
            # Nothing to wait for: say so at once rather than after ``timeout``.
            raise DaemonUnavailable(
                f"no livegated socket at {daemon.socket_path}: is livegated running? (systemctl status livegated.socket; "
                "or give the socket's path, or set LIVEGATE_SOCKET)"
            )
        daemon.start()
        try:
            await daemon.connection(timeout)
        except BaseException:
            await daemon.close()
            raise
        return daemon

    def start(self) -> None:
        """Starts connecting in the background (``connect`` does it)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    @property
    def is_connected(self) -> bool:
        return self._connection is not None and not self._connection.is_closed

    async def close(self) -> None:
        """Closes the connection and stops reconnecting; observations made through the client end."""
        self._closed = True
        for observation in list(self._observations):
            observation._end(None)
        if self._connection is not None:
            self._connection.close()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._notify()
        self._tell(LinkEvent("closed"))

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connection(self, timeout: float | None = None) -> Connection:
        """The connection now, waiting up to ``timeout`` (default ``request_wait``) seconds for one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.request_wait if timeout is None else timeout)
        while True:
            if self._closed:
                raise DaemonUnavailable("this livegate client is closed")
            if self._connection is not None and not self._connection.is_closed:
                return self._connection
            if isinstance(self._failure, ConnectionRefused):
                raise self._failure
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                # The last attempt's reason says where and why; said once.
                message = self._failure.message if self._failure else f"livegated at {self.socket_path} is not reachable"
                raise DaemonUnavailable(f"{message} (still trying)") from None

    def on_link_change(self, callback: Callable[[LinkEvent], None]) -> Callable[[], None]:
        """Calls ``callback`` (on the event loop) at every change of the link to the daemon and of the daemon's
        cloud session (:class:`LinkEvent`): ``connected`` now if it is, then ``reconnecting`` / ``connected`` as the
        daemon goes and comes back, ``session`` as the daemon's cloud session or realtime link changes, and
        ``closed``. Returns a function that unsubscribes it."""
        self._link_listeners.append(callback)
        connection = self._connection
        if connection is not None and not connection.is_closed:
            callback(LinkEvent("connected"))
            self._watch_session_soon(connection)
        return lambda: self._link_listeners.remove(callback) if callback in self._link_listeners else None

    def _tell(self, event: LinkEvent) -> None:
        for listener in list(self._link_listeners):
            listener(event)

    def _watch_session_soon(self, connection: Connection) -> None:
        """Asks the daemon for its session's changes on ``connection``, once per connection (in a task kept until
        done), and tells the state now."""
        if connection in self._session_watched:
            return
        self._session_watched.add(connection)
        task = asyncio.ensure_future(self._watch_session(connection))
        _background.add(task)
        task.add_done_callback(_background.discard)

    async def _watch_session(self, connection: Connection) -> None:
        connection.on_session_changed(
            lambda params: self._tell(LinkEvent("session", session=params.get("session"), realtime=params.get("connection")))
        )
        try:
            state = await connection.request("session.state", {"watch": True})
        except LiveGateError:
            return  # lost meanwhile: the next connection watches again
        self._tell(LinkEvent("session", session=state.get("session"), realtime=state.get("connection")))

    def _notify(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _forget(self, observation: Observation[Any]) -> None:
        self._observations.discard(observation)

    async def _run(self) -> None:
        failures = 0
        while not self._closed:
            try:
                connection = await Connection.open(self.socket_path, self.name)
            except LiveGateError as error:
                self._failure = error
                self._notify()
            else:
                failures = 0
                self._failure = None
                self._connection = connection
                self._notify()
                self._tell(LinkEvent("connected"))
                if self._link_listeners:
                    self._watch_session_soon(connection)
                resumptions = [observation._resume(connection) for observation in list(self._observations)]
                await asyncio.gather(*resumptions, return_exceptions=True)
                await connection.wait_closed()
                self._connection = None
                for observation in list(self._observations):
                    observation._lost()
                self._notify()
                if not self._closed:
                    self._tell(LinkEvent("reconnecting", error=connection.error))
            failures += 1
            delay = min(5.0, 0.1 * 2 ** min(failures - 1, 6)) * random.uniform(0.5, 1.0)
            await asyncio.sleep(delay)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Any method of the protocol (Protocol/ipc/README.md); returns its result or raises its error."""
        connection = await self.connection()
        return await connection.request(method, params)

    # The daemon

    async def hello(self) -> dict[str, Any]:
        """The daemon's ``hello`` answer on the current connection: version, session state, limits."""
        return (await self.connection()).hello

    async def stats(self) -> dict[str, Any]:
        return dict(await self.request("daemon.stats", {}))

    async def session_state(self) -> dict[str, str]:
        """``{"session", "connection"}``: the cloud session and the daemon's realtime link."""
        return dict(await self.request("session.state", {}))

    async def clients(self) -> list[dict[str, Any]]:
        """Every connection to the daemon (administrators only)."""
        return list((await self.request("daemon.clients", {}))["clients"])

    async def set_log_level(self, level: str) -> dict[str, str]:
        return dict(await self.request("daemon.setLogLevel", {"level": level}))

    # Writes

    async def create(self, collection: str, id: str, data: dict[str, Any]) -> Snapshot:
        """Creates an object; :class:`VersionConflict` when it exists."""
        result = await self.request("object.create", {"collection": collection, "id": id, "data": data})
        return Snapshot.from_json(result["snapshot"])

    async def update(
        self,
        collection: str,
        id: str,
        data: dict[str, Any],
        *,
        if_version: int | None = None,
        merge: bool = False,
        wait: bool = True,
    ) -> Snapshot | None:
        """Replaces (or, with ``merge``, merge-patches) an object's data. Observers see it at once, pending; with
        ``wait`` (the default) this returns the cloud's stored snapshot, else ``None`` once the write is durably
        queued in the daemon's outbox."""
        params: dict[str, Any] = {"collection": collection, "id": id, "data": data}
        if if_version is not None:
            params["ifVersion"] = if_version
        if merge:
            params["merge"] = True
        if not wait:
            params["wait"] = False
        result = await self.request("object.update", params)
        return Snapshot.from_json(result["snapshot"]) if "snapshot" in result else None

    async def delete(self, collection: str, id: str, *, if_version: int | None = None, wait: bool = True) -> int | None:
        """Deletes an object: the deletion's version, or ``None`` when not waiting for the cloud."""
        params: dict[str, Any] = {"collection": collection, "id": id}
        if if_version is not None:
            params["ifVersion"] = if_version
        if not wait:
            params["wait"] = False
        result = await self.request("object.delete", params)
        return int(result["version"]) if "version" in result else None

    # Observations

    async def observe_object(
        self, collection: str, id: str, *, policy: str | None = None, fields: list[str] | None = None, once: bool = False
    ) -> LiveObject:
        """Observes one object (``policy``: ``localThenFresh`` or ``freshOnly``; ``fields``: only changes of these
        top-level fields). Raises the daemon's refusal (:class:`NotPermitted`, :class:`InvalidParams`)."""
        params: dict[str, Any] = {"collection": collection, "id": id}
        if policy is not None:
            params["policy"] = policy
        if fields is not None:
            params["fields"] = fields
        if once:
            params["once"] = True
        return await self._observe(LiveObject(self, params, once))

    async def observe_collection(
        self,
        collection: str,
        *,
        where: dict[str, Any] | None = None,
        sort: str | None = None,
        descending: bool = False,
        page_size: int | None = None,
        anchor: str | None = None,
        once: bool = False,
    ) -> LiveCollection:
        """Observes a query's window: objects whose fields equal ``where``'s values, sorted by ``sort`` (then by
        id), ``page_size`` (1–100) a page, from the ``first`` or ``last`` page (``anchor``)."""
        params: dict[str, Any] = {"collection": collection}
        query: dict[str, Any] = {}
        if where is not None:
            query["where"] = where
        if sort is not None:
            query["sort"] = {"field": sort, "descending": descending}
        if query:
            params["query"] = query
        if page_size is not None:
            params["pageSize"] = page_size
        if anchor is not None:
            params["anchor"] = anchor
        if once:
            params["once"] = True
        return await self._observe(LiveCollection(self, params, once))

    async def subscribe_feed(self, collection: str) -> Feed:
        """Every change of a collection from now on, by anyone."""
        return await self._observe(Feed(self, {"collection": collection}))

    async def listen(self, stream: str) -> StreamListener:
        """Messages of ``stream`` sent to the daemon's user."""
        return await self._observe(StreamListener(self, {"stream": stream}, follow=False))

    async def follow(self, stream: str, user: str) -> StreamListener:
        """What ``user`` posts on ``stream``."""
        return await self._observe(StreamListener(self, {"stream": stream, "user": user}, follow=True))

    async def _observe(self, observation: O) -> O:
        connection = await self.connection()
        self._observations.add(observation)
        try:
            await observation._start(connection)
        except BaseException:
            observation._end(None)
            raise
        return observation

    # Streams

    async def send(self, stream: str, to: str, message: Any) -> dict[str, Any]:
        """Sends ``message`` to ``to`` on ``stream``: ``{"seq", "from", "to", "at"}``."""
        return dict(await self.request("stream.send", {"stream": stream, "to": to, "message": message}))

    async def post(self, stream: str, message: Any) -> dict[str, Any]:
        """Posts ``message`` to everyone following the daemon's user on ``stream``."""
        return dict(await self.request("stream.post", {"stream": stream, "message": message}))

    async def grant_access(
        self, stream: str, user: str, publishers: list[str], subscribers: list[str]
    ) -> dict[str, list[str]]:
        acl = {"publishers": publishers, "subscribers": subscribers}
        return dict(await self.request("stream.grantAccess", {"stream": stream, "user": user, "acl": acl}))

    async def access(self, stream: str, user: str) -> dict[str, list[str]]:
        return dict(await self.request("stream.access", {"stream": stream, "user": user}))
