# Licensed under the Apache License, Version 2.0.
"""What observations deliver: immutable states built from the daemon's notifications."""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from .changeset import ChangeSet
from .errors import LiveGateError, error_from



T = TypeVar("T")

DataStatus = Literal["notExist", "local", "fresh", "error"]
"""Where an observation's data comes from: none (``notExist``), the daemon's cache (``local``), the cloud (``fresh``)."""
LoadingStatus = Literal["notLoading", "loading", "loaded", "error"]
"""Whether the daemon is reading it from the cloud now (``loading``) or has (``loaded``)."""

@dataclass(frozen=True)
class Snapshot:
    """One version of an object, as the cloud stored it (never changes once sent)."""

    collection: str
    id: str
    version: int
    data: Any
    updated_at: str | None = None

    def data_as(self, kind: type[T]) -> T:
        """The data as the caller's type: a dataclass (built from the members its fields name; others are left out)
        or a ``TypedDict`` (the same dict, checked to hold its required keys). Raises :class:`TypeError` naming the
        object and what is missing when the data does not fit."""
        return _data_as(self.data, kind, f"{self.collection}/{self.id} v{self.version}")

    @classmethod
    def from_json(cls, value: Any) -> Snapshot:
        return cls(
            collection=value["collection"],
            id=value["id"],
            version=value["version"],
            data=value.get("data"),
            updated_at=value.get("updatedAt"),
        )


def _data_as(data: Any, kind: type[T], what: str) -> T:
    if not isinstance(data, dict):
        raise TypeError(f"the data of {what} is not an object, so not a {kind.__name__}: {data!r}")
    if typing.is_typeddict(kind):
        missing = sorted(_required_keys(kind) - data.keys())
        if missing:
            raise TypeError(f"the data of {what} is not a {kind.__name__}: it lacks {', '.join(missing)}")
        return cast(T, data)
    if dataclasses.is_dataclass(kind):
        fields = [f for f in dataclasses.fields(kind) if f.init]
        missing = [
            f.name
            for f in fields
            if f.name not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise TypeError(f"the data of {what} is not a {kind.__name__}: it lacks {', '.join(missing)}")
        return kind(**{f.name: data[f.name] for f in fields if f.name in data})
    raise TypeError(f"{kind.__name__} is neither a dataclass nor a TypedDict")


def _required_keys(kind: type[Any]) -> frozenset[str]:
    """A TypedDict's required keys. Read from its annotations: under ``from __future__ import annotations`` Python
    3.11's ``__required_keys__`` counts a ``NotRequired`` key as required."""
    try:
        hints = typing.get_type_hints(kind, include_extras=True)
    except Exception:  # an annotation that does not resolve here (a type local to a function)
        required: frozenset[str] = getattr(kind, "__required_keys__", frozenset())
        return required
    total = getattr(kind, "__total__", True)
    keys = set()
    for name, hint in hints.items():
        origin = typing.get_origin(hint)
        if origin is typing.Required or (total and origin is not typing.NotRequired):
            keys.add(name)
    return frozenset(keys)


def _snapshot_or_none(value: Any) -> Snapshot | None:
    return None if value is None else Snapshot.from_json(value)


def _error_or_none(value: Any) -> LiveGateError | None:
    return None if value is None else error_from(value)


@dataclass(frozen=True)
class ObjectState:
    """An ``object.changed`` notification: the snapshot (``None``: no such object, or nothing loaded) and statuses.

    ``data_status``: notExist, local, fresh, error. ``loading_status``: notLoading, loading, loaded, error.
    """

    snapshot: Snapshot | None
    data_status: DataStatus
    loading_status: LoadingStatus
    error: LiveGateError | None = None
    pending_writes: bool = False
    resync: bool = False

    @property
    def data(self) -> Any:
        return None if self.snapshot is None else self.snapshot.data

    @property
    def version(self) -> int | None:
        return None if self.snapshot is None else self.snapshot.version

    def data_as(self, kind: type[T]) -> T | None:
        """The data as the caller's dataclass or ``TypedDict`` (:meth:`Snapshot.data_as`); ``None`` with no snapshot."""
        return None if self.snapshot is None else self.snapshot.data_as(kind)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ObjectState:
        return cls(
            snapshot=_snapshot_or_none(params.get("snapshot")),
            data_status=params["dataStatus"],
            loading_status=params["loadingStatus"],
            error=_error_or_none(params.get("error")),
            pending_writes=params.get("pendingWrites") is True,
            resync=params.get("resync") is True,
        )


@dataclass(frozen=True)
class CollectionState:
    """A collection window after a ``collection.changed`` notification: its items (the client applied and checked
    the changes), the query's ``count``, paging and statuses. ``changes`` are relative to the previous state's items,
    or to an empty window when ``reset``."""

    items: tuple[Snapshot, ...]
    count: int
    has_next: bool
    has_previous: bool
    data_status: DataStatus
    loading_status: LoadingStatus
    changes: ChangeSet = field(default_factory=ChangeSet)
    reset: bool = False
    error: LiveGateError | None = None
    resync: bool = False
    pending_ids: tuple[str, ...] = ()

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]

    def unchanged(self, loading_status: LoadingStatus, error: LiveGateError | None = None) -> CollectionState:
        """The same window with no change and another loading status (the daemon went away, or refused it)."""
        return dataclasses.replace(
            self, changes=ChangeSet(), reset=False, resync=False, loading_status=loading_status, error=error
        )


@dataclass(frozen=True)
class FeedEvent:
    """A ``feed.event``: ``event`` is ready, next (``seq``, ``snapshot``, ``deleted``), status (``status``), resync
    or error (``error``)."""

    event: str
    seq: int | None = None
    snapshot: Snapshot | None = None
    deleted: bool = False
    status: str | None = None
    error: LiveGateError | None = None

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> FeedEvent:
        return cls(
            event=params["event"],
            seq=params.get("seq"),
            snapshot=_snapshot_or_none(params.get("snapshot")),
            deleted=params.get("deleted") is True,
            status=params.get("status"),
            error=_error_or_none(params.get("error")),
        )


@dataclass(frozen=True)
class StreamEvent:
    """A ``stream.message`` (``message``, ``seq``, ``sender``, ``recipient``, ``at``) or a ``stream.notice``
    (``resync`` or ``error``)."""

    stream: str | None = None
    message: Any = None
    seq: int | None = None
    sender: str | None = None
    recipient: str | None = None
    at: str | None = None
    resync: bool = False
    error: LiveGateError | None = None

    @property
    def is_message(self) -> bool:
        return not self.resync and self.error is None

    @classmethod
    def from_params(cls, method: str, params: dict[str, Any]) -> StreamEvent:
        if method == "stream.notice":
            return cls(resync=params.get("resync") is True, error=_error_or_none(params.get("error")))
        return cls(
            stream=params.get("stream"),
            message=params.get("message"),
            seq=params.get("seq"),
            sender=params.get("from"),
            recipient=params.get("to"),
            at=params.get("at"),
        )


class ResumeFilter:
    """What an object observer that outlives connections receives (the Swift client's ``ResumeFilter``).

    Across a reconnection the observer sees ``loading_status`` go to ``loading`` and back to ``loaded``, and never a
    snapshot older than, or the same data again as, one it already received; deletions and resync notices pass."""

    def __init__(self) -> None:
        self.last: ObjectState | None = None

    def pass_on(self, state: ObjectState, unchanged: bool = False) -> ObjectState | None:
        """What goes to the observer for ``state``, if anything: the state itself, or for a re-observation's
        ``unchanged`` notice (the version it holds is confirmed) the snapshot it holds with the notice's statuses,
        when they are news."""
        if not unchanged:
            return state if self.admit(state) else None
        last = self.last
        if last is None or last.snapshot is None:
            return None
        if last.data_status == state.data_status and last.loading_status == state.loading_status and last.error is None:
            return None
        self.last = dataclasses.replace(
            last, data_status=state.data_status, loading_status=state.loading_status, error=None, resync=False
        )
        return self.last

    @property
    def resume_version(self) -> int | None:
        """The version to re-observe from (``sinceVersion``): the last snapshot delivered, when it was the cloud's
        data (a pending write's state is not: how the write ends must be told whatever its version)."""
        last = self.last
        if last is None or last.snapshot is None or last.pending_writes:
            return None
        return last.snapshot.version

    def admit(self, state: ObjectState) -> bool:
        last = self.last
        if last is None:
            self.last = state
            return True
        version = state.version or 0
        last_version = last.version or 0
        if state.resync:
            deliver = True
        elif state.pending_writes or last.pending_writes:
            # A local write shows at once (with the version it applies to), and so does how it ends.
            deliver = version >= last_version or state.snapshot is None
        elif state.snapshot is None:
            # Nothing cached yet after a restart is not news; a confirmed absence is (a deletion, or the end of the
            # loading of an object that does not exist), once.
            deliver = state.loading_status != "loading" and (
                last.snapshot is not None or state.loading_status != last.loading_status
            )
        elif version != last_version:
            deliver = version > last_version
        else:
            # The same data: only the end of the loading, once.
            deliver = state.loading_status != "loading" and state.loading_status != last.loading_status
        if deliver:
            self.last = state
        return deliver

    def disconnected(self) -> ObjectState | None:
        """The connection was lost: the state to give the observer (its data, now ``loading``), if any."""
        last = self.last
        if last is None or last.loading_status == "loading":
            return None
        self.last = dataclasses.replace(last, loading_status="loading", resync=False)
        return self.last


@dataclass(frozen=True)
class LinkEvent:
    """A change of a client's link to livegated, or of the daemon's cloud session.

    ``kind``: ``connected`` (a connection is made and every observation is being made again on it),
    ``reconnecting`` (the connection was lost: ``error`` says why; the client tries again with backoff),
    ``closed`` (the client was closed), or ``session`` (the daemon's ``session.changed``: ``session`` is its cloud
    session, ``notLoggedIn``, ``establishing``, ``established``, ``tokenExpired`` or ``terminated``, and ``realtime``
    its realtime link, ``offline``, ``connecting``, ``connected`` or ``reconnecting``)."""

    kind: Literal["connected", "reconnecting", "closed", "session"]
    error: LiveGateError | None = None
    session: str | None = None
    realtime: str | None = None

