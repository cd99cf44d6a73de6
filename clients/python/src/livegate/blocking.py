# Licensed under the Apache License, Version 2.0.
"""The blocking client of livegated: the asyncio client run on a thread of its own, for scripts and tools.

.. code-block:: python

    import livegate

    with livegate.Client(client="my-script") as daemon:
        with daemon.observe_object("notes", "n1") as note:
            for state in note:
                print(state.version, state.data, state.loading_status)

One thread can follow several observations: :meth:`Client.each` iterates their states in the order they arrived,
:meth:`Client.select` waits for the next one of any.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any, Generic, Self, TypeVar

from . import aio
from .errors import LiveGateError
from .observations import LiveCollection, Observation, _End
from .states import CollectionState, FeedEvent, LinkEvent, ObjectState, Snapshot, StreamEvent

S = TypeVar("S")
R = TypeVar("R")

__all__ = ["Client", "BlockingObservation", "BlockingCollection"]


class Client:
    """A client of livegated that outlives the daemon (see :class:`livegate.aio.Client`), with blocking calls.

    Raises :class:`DaemonUnavailable` when no connection is made within ``timeout`` seconds, and
    :class:`ConnectionRefused` when the daemon refuses this client. Close it, or use it in a ``with``."""

    def __init__(
        self, socket: str | None = None, client: str = "python", timeout: float = 10.0, request_wait: float = 10.0
    ) -> None:
        self._loop = asyncio.new_event_loop()
        # Guards every observation's inbox: a thread waits on it for one observation (``next``) or several
        # (``select``); arrivals are numbered, so states of several observations are read in the order they came.
        self._arrived = threading.Condition()
        self._arrivals = itertools.count()
        self._thread = threading.Thread(target=self._loop.run_forever, name="livegate-client", daemon=True)
        self._thread.start()
        try:
            self._client: aio.Client = self._call(aio.Client.connect(socket, client, timeout, request_wait))
        except BaseException:
            self._stop()
            raise
        self.socket_path = self._client.socket_path

    def _call(self, coroutine: Coroutine[Any, Any, R]) -> R:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def close(self) -> None:
        """Closes the connection; observations made through the client end."""
        if self._loop.is_closed():
            return
        self._call(self._client.close())
        self._stop()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on_link_change(self, callback: Callable[[LinkEvent], None]) -> Callable[[], None]:
        """Calls ``callback`` at every change of the link to the daemon and of its cloud session (:class:`LinkEvent`),
        on the client's own thread (keep it short). Returns a function that unsubscribes it."""
        return self._on_loop(lambda: self._client.on_link_change(callback))

    def _on_loop(self, subscribe: Callable[[], Callable[[], None]]) -> Callable[[], None]:
        """Runs ``subscribe`` on the client's loop; returns its unsubscribe function made callable from any thread:
        it returns once unsubscribed, so no call comes after it (called from a callback too)."""

        async def subscribing() -> Callable[[], None]:
            return subscribe()

        unsubscribe = self._call(subscribing())

        async def unsubscribing() -> None:
            unsubscribe()

        def stop() -> None:
            if threading.current_thread() is self._thread:
                unsubscribe()
            elif not self._loop.is_closed():
                self._call(unsubscribing())

        return stop

    @property
    def is_connected(self) -> bool:
        return self._client.is_connected

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self._call(self._client.request(method, params))

    def hello(self) -> dict[str, Any]:
        return self._call(self._client.hello())

    def stats(self) -> dict[str, Any]:
        return self._call(self._client.stats())

    def session_state(self) -> dict[str, str]:
        return self._call(self._client.session_state())

    def clients(self) -> list[dict[str, Any]]:
        return self._call(self._client.clients())

    def set_log_level(self, level: str) -> dict[str, str]:
        return self._call(self._client.set_log_level(level))

    def create(self, collection: str, id: str, data: dict[str, Any]) -> Snapshot:
        return self._call(self._client.create(collection, id, data))

    def update(
        self,
        collection: str,
        id: str,
        data: dict[str, Any],
        *,
        if_version: int | None = None,
        merge: bool = False,
        wait: bool = True,
    ) -> Snapshot | None:
        return self._call(self._client.update(collection, id, data, if_version=if_version, merge=merge, wait=wait))

    def delete(self, collection: str, id: str, *, if_version: int | None = None, wait: bool = True) -> int | None:
        return self._call(self._client.delete(collection, id, if_version=if_version, wait=wait))

    def send(self, stream: str, to: str, message: Any) -> dict[str, Any]:
        return self._call(self._client.send(stream, to, message))

    def post(self, stream: str, message: Any) -> dict[str, Any]:
        return self._call(self._client.post(stream, message))

    def grant_access(self, stream: str, user: str, publishers: list[str], subscribers: list[str]) -> dict[str, list[str]]:
        return self._call(self._client.grant_access(stream, user, publishers, subscribers))

    def access(self, stream: str, user: str) -> dict[str, list[str]]:
        return self._call(self._client.access(stream, user))

    def observe_object(
        self, collection: str, id: str, *, policy: str | None = None, fields: list[str] | None = None, once: bool = False
    ) -> BlockingObservation[ObjectState]:
        return self._observe(
            BlockingObservation, self._client.observe_object(collection, id, policy=policy, fields=fields, once=once)
        )

    def observe_collection(
        self,
        collection: str,
        *,
        where: dict[str, Any] | None = None,
        sort: str | None = None,
        descending: bool = False,
        page_size: int | None = None,
        anchor: str | None = None,
        once: bool = False,
    ) -> BlockingCollection:
        observed = self._client.observe_collection(
            collection, where=where, sort=sort, descending=descending, page_size=page_size, anchor=anchor, once=once
        )
        return self._observe(BlockingCollection, observed)

    def subscribe_feed(self, collection: str) -> BlockingObservation[FeedEvent]:
        return self._observe(BlockingObservation, self._client.subscribe_feed(collection))

    def listen(self, stream: str) -> BlockingObservation[StreamEvent]:
        return self._observe(BlockingObservation, self._client.listen(stream))

    def follow(self, stream: str, user: str) -> BlockingObservation[StreamEvent]:
        return self._observe(BlockingObservation, self._client.follow(stream, user))

    def select(
        self, observations: Iterable[BlockingObservation[Any]], timeout: float | None = None
    ) -> tuple[BlockingObservation[Any], Any]:
        """The next state not read yet of any of ``observations`` (the one that arrived first), with its observation:
        one thread waits on many, as :func:`select.select` does on files. Raises :class:`TimeoutError` after
        ``timeout`` seconds, :class:`StopIteration` when every one has ended, or the error of one the daemon ended
        (it then counts as ended; call again for the others)."""
        watched = list(observations)
        if any(observation._owner is not self for observation in watched):
            raise ValueError("select waits on observations made through this client only")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._arrived:
            while True:
                waiting = [observation for observation in watched if observation._inbox.items]
                if waiting:
                    first = min(waiting, key=lambda observation: observation._inbox.items[0][0])
                    try:
                        return first, first._inbox.take()
                    except StopIteration:
                        continue  # it was closed: the others go on
                if all(observation._inbox.ended is not None for observation in watched):
                    raise StopIteration
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no new state of {len(watched)} observations within {timeout} s")
                self._arrived.wait(remaining)

    def each(self, *observations: BlockingObservation[Any]) -> Iterator[tuple[BlockingObservation[Any], Any]]:
        """The states of several observations, each with its observation, in the order they arrived (each one's state
        now first), until every one has ended. Raises the error of one the daemon ended, which ends this iteration;
        ``each`` called again goes on with the others."""
        while True:
            try:
                yield self.select(observations)
            except StopIteration:
                return

    def _observe(self, kind: Callable[[Client, Any, _Inbox], R], observing: Coroutine[Any, Any, Any]) -> R:
        inbox = _Inbox(self._arrived, self._arrivals)

        async def observe() -> Any:
            observation = await observing
            observation._add_listener(inbox.arrive)  # in the same loop step: no state is missed
            return observation

        return kind(self, self._call(observe()), inbox)


class _Inbox:
    """An observation's states not read yet, numbered as they arrived (across the client's observations), guarded
    by the client's condition. The observation's listener holds it, not the blocking observation: releasing that one
    still ends the token."""

    def __init__(self, arrived: threading.Condition, arrivals: Iterator[int]) -> None:
        self.arrived = arrived
        self.arrivals = arrivals
        self.items: deque[tuple[int, Any]] = deque()
        self.ended: _End | None = None

    def arrive(self, item: Any) -> None:
        """On the client's loop: a state (or the end) arrived."""
        with self.arrived:
            self.items.append((next(self.arrivals), item))
            self.arrived.notify_all()

    def take(self) -> Any:
        """The oldest state (the condition held); the end is raised: the observation's error, or StopIteration."""
        _, item = self.items.popleft()
        if isinstance(item, _End):
            self.ended = item
            raise item.error or StopIteration
        return item


class BlockingObservation(Generic[S]):
    """An observation's states, read from any thread: ``latest``, iteration (the state now, then each later one,
    until it ends), :meth:`next` and :meth:`wait_for`. Ends with :meth:`close`, ``with``, or when released."""

    def __init__(self, owner: Client, observation: Observation[S], inbox: _Inbox) -> None:
        self._owner = owner
        self._observation = observation
        self._inbox = inbox

    @property
    def latest(self) -> S | None:
        """The state now (after every state this thread has not read yet)."""
        return self._observation.latest

    @property
    def token(self) -> int | None:
        return self._observation.token

    def next(self, timeout: float | None = None) -> S:
        """The next state not read yet. Raises :class:`TimeoutError` after ``timeout`` seconds, :class:`StopIteration`
        when the observation ended, or its error when the daemon refused it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._owner._arrived:
            while not self._inbox.items:
                if self._inbox.ended is not None:
                    raise self._inbox.ended.error or StopIteration
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no new state within {timeout} s")
                self._owner._arrived.wait(remaining)
            state: S = self._inbox.take()
            return state

    def __iter__(self) -> Iterator[S]:
        while True:
            try:
                yield self.next()
            except StopIteration:
                return

    def wait_for(self, predicate: Callable[[S], bool], timeout: float = 10.0) -> S:
        """Reads states until one satisfies ``predicate`` (those before it are consumed). Raises
        :class:`TimeoutError` when none does within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no state satisfied the condition within {timeout} s; the last: {self.latest!r}")
            try:
                state = self.next(remaining)
            except TimeoutError:
                continue
            except StopIteration:
                raise LiveGateError("the observation ended") from None
            if predicate(state):
                return state

    def on_change(
        self, callback: Callable[[S], None], on_end: Callable[[LiveGateError | None], None] | None = None
    ) -> Callable[[], None]:
        """Calls ``callback`` with the state now, if any, then with every later one, on the client's own thread (keep
        it short; hand work to yours); ``on_end`` once the observation ends (its error, or ``None``). Returns a
        function that unsubscribes both. Iterating the observation still works beside it."""

        return self._owner._on_loop(lambda: self._observation.on_change(callback, on_end))

    def close(self) -> None:
        """Ends the observation: the daemon's token is invalidated."""
        if not self._owner._loop.is_closed():
            self._owner._call(self._observation.close())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BlockingCollection(BlockingObservation[CollectionState]):
    """A collection window read from any thread, with its paging."""

    _observation: LiveCollection

    def next_page(self) -> bool:
        return self._owner._call(self._observation.next_page())

    def previous_page(self) -> bool:
        return self._owner._call(self._observation.previous_page())

    def reset_page(self) -> bool:
        return self._owner._call(self._observation.reset_page())

    def fetch_items(self, offset: int, limit: int, source: str = "window") -> dict[str, Any]:
        return self._owner._call(self._observation.fetch_items(offset, limit, source))
