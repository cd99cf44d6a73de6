# Licensed under the Apache License, Version 2.0.
"""Applying a ``collection.changed`` notification's changes to a window (Protocol/ipc/README.md, *collection.changed*).

The convention is UIKit's batch update: deletions and move sources in old indices, insertions and move destinations
in new ones, modifications as ``[old, new]`` pairs. Every index is checked: a notification that does not fit the
window raises :class:`ChangeSetMismatch` instead of giving a wrong list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .errors import ChangeSetMismatch

T = TypeVar("T")


@dataclass(frozen=True)
class ChangeSet:
    deletions: tuple[int, ...] = ()
    insertions: tuple[int, ...] = ()
    modifications: tuple[tuple[int, int], ...] = ()
    moves: tuple[tuple[int, int], ...] = ()

    @property
    def is_empty(self) -> bool:
        return not (self.deletions or self.insertions or self.modifications or self.moves)

    @classmethod
    def from_json(cls, value: Any) -> ChangeSet:
        if not isinstance(value, dict):
            raise ChangeSetMismatch(f"changes is not an object: {value!r}")

        def indices(name: str) -> tuple[int, ...]:
            found = value.get(name, [])
            if not isinstance(found, list) or not all(type(i) is int for i in found):
                raise ChangeSetMismatch(f"changes.{name} is not a list of indices: {found!r}")
            return tuple(found)

        def pairs(name: str) -> tuple[tuple[int, int], ...]:
            found = value.get(name, [])
            if not isinstance(found, list) or not all(
                isinstance(p, list) and len(p) == 2 and all(type(i) is int for i in p) for p in found
            ):
                raise ChangeSetMismatch(f"changes.{name} is not a list of index pairs: {found!r}")
            return tuple((p[0], p[1]) for p in found)

        return cls(indices("deletions"), indices("insertions"), pairs("modifications"), pairs("moves"))

    def apply(self, old: Sequence[T], new_item: Callable[[int], T], size: int | None = None) -> list[T]:
        """The window after these changes: ``new_item(i)`` gives the inserted or modified item at new index ``i``.
        Raises :class:`ChangeSetMismatch` when an index is out of place or the result is not ``size`` long."""
        count = len(old) - len(self.deletions) + len(self.insertions)
        if size is not None and count != size:
            raise ChangeSetMismatch(
                f"{len(old)} items - {len(self.deletions)} deleted + {len(self.insertions)} inserted != size {size}"
            )
        if count < 0:
            raise ChangeSetMismatch(f"more deletions ({len(self.deletions)}) than items ({len(old)})")
        placed: list[bool] = [False] * count
        result: list[Any] = [None] * count
        leaving: set[int] = set()

        def take_old(index: int, what: str) -> None:
            if not 0 <= index < len(old) or index in leaving:
                raise ChangeSetMismatch(f"{what} {index} is not an item of the old window of {len(old)}")
            leaving.add(index)

        def put_new(index: int, item: Any, what: str) -> None:
            if not 0 <= index < count or placed[index]:
                raise ChangeSetMismatch(f"{what} {index} is not a free place of the new window of {count}")
            placed[index] = True
            result[index] = item

        for index in self.deletions:
            take_old(index, "deletion")
        for index in self.insertions:
            put_new(index, new_item(index), "insertion")
        for source, destination in self.moves:
            take_old(source, "move source")
            put_new(destination, old[source], "move destination")
        free = 0
        for index, item in enumerate(old):
            if index in leaving:
                continue
            while placed[free]:
                free += 1
            placed[free] = True
            result[free] = item
        for source, destination in self.modifications:
            if not 0 <= source < len(old) or source in self.deletions:
                raise ChangeSetMismatch(f"modification source {source} is not a kept item of the old window")
            if not 0 <= destination < count:
                raise ChangeSetMismatch(f"modification {destination} is outside the new window of {count}")
            result[destination] = new_item(destination)
        return result


def items_by_index(items: Any) -> Mapping[int, Any]:
    """A notification's ``items`` (keyed by the new index as a string) keyed by int."""
    if not isinstance(items, dict):
        raise ChangeSetMismatch(f"items is not an object: {items!r}")
    try:
        return {int(key): value for key, value in items.items()}
    except ValueError as error:
        raise ChangeSetMismatch(f"an items key is not an index: {error}") from None
