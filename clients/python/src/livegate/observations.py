# Licensed under the Apache License, Version 2.0.
"""Live observations made through :class:`livegate.aio.Client`: each holds one daemon token, made again on every new
connection after the daemon restarts, and ended by :meth:`Observation.close`, ``async with``, or when released."""

from __future__ import annotations

import asyncio
import collections
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from .changeset import ChangeSet, items_by_index
from .connection import Connection
from .errors import (
    ChangeSetMismatch,
    CloudUnavailable,
    DaemonUnavailable,
    LimitExceeded,
    LiveGateError,
    error_from,
)
from .states import CollectionState, FeedEvent, ObjectState, ResumeFilter, Snapshot, StreamEvent

if TYPE_CHECKING:
    from .aio import Client

S = TypeVar("S")


class _End:
    """Told to listeners when an observation ends (``error``: why, when it was not closed by its owner)."""

    def __init__(self, error: LiveGateError | None) -> None:
        self.error = error


Listener = Callable[[Any], None]


class _Binding:
    """The daemon token an observation holds now; released when the observation is garbage-collected."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.connection: Connection | None = None
        self.token: int | None = None

    def release(self) -> None:
        connection, token = self.connection, self.token
        self.connection, self.token = None, None
        if connection is None or token is None or connection.is_closed:
            return
        connection.route(token, None)
        bound = connection

        def invalidate() -> None:
            if not bound.is_closed:
                task = asyncio.ensure_future(_quietly(bound.request("token.invalidate", {"token": token})))
                _background.add(task)
                task.add_done_callback(_background.discard)

        try:
            self.loop.call_soon_threadsafe(invalidate)
        except RuntimeError:  # the loop is closed: so is the connection
            pass


_background: set[asyncio.Future[Any]] = set()


async def _quietly(request: Any) -> None:
    try:
        await request
    except LiveGateError:
        pass


class _StateIterator(Generic[S]):
    """Iterates an observation's states: listens from its making, so nothing between making and first use is lost."""

    def __init__(self, observation: Observation[S]) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._remove = observation._add_listener(self._queue.put_nowait)

    def __aiter__(self) -> _StateIterator[S]:
        return self

    async def __anext__(self) -> S:
        item = await self._queue.get()
        if isinstance(item, _End):
            self._remove()
            if item.error is not None:
                raise item.error
            raise StopAsyncIteration
        return item  # type: ignore[no-any-return]

    def __del__(self) -> None:
        self._remove()


def _router(observation: Observation[Any]) -> Callable[[str, dict[str, Any]], None]:
    # The connection holds this, not the observation: releasing the observation is what ends it.
    reference = weakref.ref(observation)

    def route(method: str, params: dict[str, Any]) -> None:
        target = reference()
        if target is not None:
            target._notified(method, params)

    return route


class Observation(Generic[S]):
    """A daemon token and the states it delivers, in order.

    ``latest`` is the state now. ``async for state in observation`` yields the state now (if any), then every later
    one until the observation ends. :meth:`wait_for` waits for a state that satisfies a predicate."""

    _method: str

    def __init__(self, client: Client, params: dict[str, Any], once: bool = False) -> None:
        self._client = client
        self._params = params
        self._once = once
        self.latest: S | None = None
        self.ended = False
        self.error: LiveGateError | None = None
        self._listeners: list[Listener] = []
        self._binding = _Binding(asyncio.get_running_loop())
        weakref.finalize(self, _Binding.release, self._binding)

    @property
    def token(self) -> int | None:
        """The daemon's token on the current connection (changes after a reconnection)."""
        return self._binding.token

    # Delivery

    def _add_listener(self, listener: Listener) -> Callable[[], None]:
        """Calls ``listener`` (on the event loop) with the state now, if any, then with every later one; with an
        :class:`_End` when the observation ends. Returns a function that removes it."""
        if self.latest is not None:
            listener(self.latest)
        if self.ended:
            listener(_End(self.error))
            return lambda: None
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def on_change(
        self, callback: Callable[[S], None], on_end: Callable[[LiveGateError | None], None] | None = None
    ) -> Callable[[], None]:
        """Calls ``callback`` (on the event loop) with the state now, if any, then with every later one (Firestore's
        ``on_snapshot``); ``on_end`` once the observation ends, with its error when the daemon refused it (``None``
        when it was closed). Returns a function that unsubscribes both; the observation goes on until closed."""

        def listener(item: Any) -> None:
            if isinstance(item, _End):
                if on_end is not None:
                    on_end(item.error)
            else:
                callback(item)

        return self._add_listener(listener)

    def _emit(self, state: S) -> None:
        self.latest = state
        for listener in list(self._listeners):
            listener(state)

    def __aiter__(self) -> _StateIterator[S]:
        """The states from now on (the state now first, for observations of states); it listens from this call."""
        return _StateIterator(self)

    async def wait_for(self, predicate: Callable[[S], bool], timeout: float | None = None) -> S:
        """The first state (the one now included) for which ``predicate`` holds. Raises :class:`TimeoutError` after
        ``timeout`` seconds, or the observation's error when it ends first."""
        future: asyncio.Future[S] = asyncio.get_running_loop().create_future()

        def check(item: Any) -> None:
            if future.done():
                return
            if isinstance(item, _End):
                future.set_exception(item.error or LiveGateError("the observation ended"))
            elif predicate(item):
                future.set_result(item)

        remove = self._add_listener(check)
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            remove()

    # Life

    async def close(self) -> None:
        """Ends the observation: the daemon's token is invalidated, nothing more is delivered."""
        connection, token = self._binding.connection, self._binding.token
        self._end(None)
        if connection is not None and token is not None and not self._once and not connection.is_closed:
            await _quietly(connection.request("token.invalidate", {"token": token}))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _end(self, error: LiveGateError | None) -> None:
        if self.ended:
            return
        self.ended = True
        self.error = error
        self._client._forget(self)
        connection, token = self._binding.connection, self._binding.token
        if connection is not None and token is not None:
            connection.route(token, None)
        self._binding.connection, self._binding.token = None, None
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener(_End(error))

    async def _start(self, connection: Connection, resuming: bool = False) -> None:
        """Makes the daemon's token on ``connection`` (raises the daemon's refusal)."""

        def bind(result: Any) -> None:
            token = result["token"]
            self._binding.connection, self._binding.token = connection, token
            if self.ended:  # closed while the request was on its way
                self._binding.release()
                return
            connection.route(token, _router(self))
            if resuming:
                self._resumed()

        await connection.request(self._method, self._observe_params(), on_answer=bind)

    def _observe_params(self) -> dict[str, Any]:
        """The params of the observing request (made again after a reconnection)."""
        return self._params

    async def _resume(self, connection: Connection) -> None:
        """Makes the token again on a new connection, until it is made, refused, or the connection is lost too."""
        failures = 0
        while not self.ended and not connection.is_closed:
            try:
                await self._start(connection, resuming=True)
                return
            except (CloudUnavailable, LimitExceeded):
                failures += 1
                await asyncio.sleep(0.05 * min(failures, 20))
            except DaemonUnavailable:
                return  # lost again: the next connection resumes it
            except LiveGateError as error:
                self._refused(error)
                self._end(error)
                return

    def _lost(self) -> None:
        """The connection was lost (the token with it)."""
        self._binding.connection, self._binding.token = None, None

    def _resumed(self) -> None:
        """The token was made again on a new connection."""

    def _refused(self, error: LiveGateError) -> None:
        """The daemon no longer accepts the observation (it will not after a retry either)."""

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        raise NotImplementedError


class LiveObject(Observation[ObjectState]):
    """An observed object: ``latest`` is its :class:`ObjectState`. Across a daemon restart, states go to ``loading``
    and back to ``loaded``, never a lost or repeated version (the same rule as the Swift client's)."""

    _method = "object.observe"

    def __init__(self, client: Client, params: dict[str, Any], once: bool = False) -> None:
        super().__init__(client, params, once)
        self._filter = ResumeFilter()
        self.collection: str = params["collection"]
        self.id: str = params["id"]

    def _observe_params(self) -> dict[str, Any]:
        # Observed again after a reconnection from the last version delivered: the daemon then tells nothing twice,
        # a skip with a resync notice first, and an unchanged object with an ``unchanged`` notice.
        since = None if self._once else self._filter.resume_version
        return self._params if since is None else dict(self._params, sinceVersion=since)

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method != "object.changed":
            return
        state = self._filter.pass_on(ObjectState.from_params(params), unchanged=params.get("unchanged") is True)
        if state is not None:
            self._emit(state)
        if self._once:
            self._binding.token = None  # a fired once-token ends by itself
            self._end(None)

    def _lost(self) -> None:
        super()._lost()
        notice = self._filter.disconnected()
        if notice is not None:
            self._emit(notice)

    def _refused(self, error: LiveGateError) -> None:
        last = self._filter.last
        self._emit(
            ObjectState(
                snapshot=last.snapshot if last else None,
                data_status=last.data_status if last else "notExist",
                loading_status="error",
                error=error,
            )
        )


class LiveCollection(Observation[CollectionState]):
    """An observed query's window: ``latest.items`` is the window (this client applied and checked every change),
    ``latest.count`` the query's count. Across a daemon restart the window goes ``loading``; the first state after
    has ``reset`` (changes from an empty window) and all the pages it had, at once: the window comes back whole."""

    _method = "collection.observe"

    def __init__(self, client: Client, params: dict[str, Any], once: bool = False) -> None:
        super().__init__(client, params, once)
        self.collection: str = params["collection"]
        self._items: list[Snapshot] = []
        self._starts_window = False
        self._moves: list[str] = []
        self.mismatches = 0

    @property
    def items(self) -> list[Snapshot]:
        return list(self._items)

    async def next_page(self) -> bool:
        """One more page at the window's end (first-anchored); False when there is none."""
        return await self._move("collection.nextPage")

    async def previous_page(self) -> bool:
        """One more page at the window's start (last-anchored); False when there is none."""
        return await self._move("collection.previousPage")

    async def reset_page(self) -> bool:
        """Back to one page; False when it holds one already."""
        return await self._move("collection.resetPage")

    async def fetch_items(self, offset: int, limit: int, source: str = "window") -> dict[str, Any]:
        """``collection.items``: ``limit`` items from ``offset`` of the window, or (``source="result"``) of the
        query's whole result, read by index from the daemon's cache. Returns ``{"offset", "items", "size", "count"}``
        with the items as :class:`Snapshot`."""
        connection, token = self._bound()
        result = await connection.request(
            "collection.items", {"token": token, "offset": offset, "limit": limit, "from": source}
        )
        result["items"] = [Snapshot.from_json(item) for item in result["items"]]
        return dict(result)

    def _bound(self) -> tuple[Connection, int]:
        connection, token = self._binding.connection, self._binding.token
        if connection is None or token is None or connection.is_closed:
            raise DaemonUnavailable("the observation has no connection to livegated now (it is reconnecting)")
        return connection, token

    async def _move(self, method: str) -> bool:
        connection, token = self._bound()
        moved = bool((await connection.request(method, {"token": token}))["moved"])
        if moved:
            if method == "collection.resetPage":
                self._moves.clear()
            else:
                self._moves.append(method)
        return moved

    def _observe_params(self) -> dict[str, Any]:
        # The pages it had before a reconnection, asked for at once: the window comes back whole.
        return dict(self._params, pages=1 + len(self._moves)) if self._moves else self._params

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method != "collection.changed":
            return
        if (
            self._starts_window
            and self.latest is not None
            and params.get("loadingStatus") == "loading"
            and params.get("dataStatus") == "notExist"
            and params.get("size") == 0
        ):
            return  # after a reconnection: the new token's empty placeholder; the window it holds stays, loading
        try:
            reset = params.get("reset") is True or self._starts_window
            changes = ChangeSet.from_json(params["changes"])
            items = items_by_index(params.get("items", {}))

            def new_item(index: int) -> Snapshot:
                if index not in items:
                    raise ChangeSetMismatch(f"no item for new index {index}")
                return Snapshot.from_json(items[index])

            window = changes.apply([] if reset else self._items, new_item, size=params["size"])
            state = CollectionState(
                items=tuple(window),
                count=params["count"],
                has_next=params.get("hasNext") is True,
                has_previous=params.get("hasPrevious") is True,
                data_status=params["dataStatus"],
                loading_status=params["loadingStatus"],
                changes=changes,
                reset=reset,
                error=None if params.get("error") is None else error_from(params["error"]),
                resync=params.get("resync") is True,
                pending_ids=tuple(params.get("pendingIds", ())),
            )
        except (ChangeSetMismatch, KeyError, TypeError, ValueError):
            self._observe_again()
            return
        self._starts_window = False
        self._items = window
        self._emit(state)
        if self._once:
            self._binding.token = None
            self._end(None)

    def _observe_again(self) -> None:
        """A notification did not fit the window: the token is released and the query observed again (its first
        state then has ``reset``). Counted in ``mismatches``."""
        self.mismatches += 1
        connection = self._binding.connection
        self._binding.release()
        self._starts_window = True
        if connection is not None and not self.ended:
            task = asyncio.ensure_future(self._resume(connection))
            _background.add(task)
            task.add_done_callback(_background.discard)

    def _lost(self) -> None:
        super()._lost()
        self._starts_window = True
        if self.latest is not None and self.latest.loading_status != "loading":
            self._emit(self.latest.unchanged("loading"))

    def _refused(self, error: LiveGateError) -> None:
        if self.latest is not None:
            self._emit(self.latest.unchanged("error", error))


class _Events(Observation[S]):
    """An observation of events rather than states: a listener hears the events after it was added (``latest`` is
    the last one). The events that arrive before the first listener is added are kept for that listener (with the
    asyncio client, the iteration an app starts right after subscribing, or ``on_change``; the blocking client adds
    its own at once): a subscription's start (``ready``) is not missed. At most :attr:`EARLY_EVENTS` are kept;
    beyond them the oldest go, and a resync event goes first, so the loss is said."""

    EARLY_EVENTS = 10_000

    def __init__(self, client: Client, params: dict[str, Any], once: bool = False) -> None:
        super().__init__(client, params, once)
        self._early: collections.deque[S] | None = collections.deque(maxlen=self.EARLY_EVENTS)
        self._early_overflowed = False

    def _emit(self, state: S) -> None:
        if self._early is not None:
            if len(self._early) == self._early.maxlen:
                self._early_overflowed = True
            self._early.append(state)
        super()._emit(state)

    def _resync_event(self) -> S:
        raise NotImplementedError

    def _add_listener(self, listener: Listener) -> Callable[[], None]:
        early: collections.deque[S] | list[S] = self._early if self._early is not None else []
        self._early = None
        latest, self.latest = self.latest, None
        try:
            if self._early_overflowed:
                listener(self._resync_event())
            for event in early:
                listener(event)
            return super()._add_listener(listener)
        finally:
            self.latest = latest


class Feed(_Events[FeedEvent]):
    """Every change of a collection, by anyone (``feed.event``). After a daemon restart an event ``resync`` says
    changes made meanwhile were not replayed."""

    _method = "feed.subscribe"

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method == "feed.event":
            self._emit(FeedEvent.from_params(params))

    def _resumed(self) -> None:
        self._emit(FeedEvent(event="resync"))

    def _resync_event(self) -> FeedEvent:
        return FeedEvent(event="resync")


class StreamListener(_Events[StreamEvent]):
    """Messages of a stream sent to the daemon's user (``listen``) or posted by a user it follows (``follow``).
    After a daemon restart a notice with ``resync`` says messages sent meanwhile are lost."""

    _method = "stream.listen"

    def __init__(self, client: Client, params: dict[str, Any], follow: bool) -> None:
        super().__init__(client, params)
        if follow:
            self._method = "stream.follow"

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method in ("stream.message", "stream.notice"):
            self._emit(StreamEvent.from_params(method, params))

    def _resumed(self) -> None:
        self._emit(StreamEvent(resync=True))

    def _resync_event(self) -> StreamEvent:
        return StreamEvent(resync=True)


__all__ = ["Observation", "LiveObject", "LiveCollection", "Feed", "StreamListener"]
