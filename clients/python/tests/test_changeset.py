# Licensed under the Apache License, Version 2.0.
"""ChangeSet.apply against a model: random windows and random changes between them, seeded."""

from __future__ import annotations

import random

import pytest

from livegate import ChangeSet, ChangeSetMismatch


def changes_between(old: list[str], new: list[str], rng: random.Random) -> ChangeSet:
    """A change set from ``old`` to ``new`` built apart from ``apply``: kept items that stay must keep their
    relative order; any others are moves (the daemon moves as few as possible; any valid choice must apply)."""
    new_index = {item: index for index, item in enumerate(new)}
    deletions = tuple(index for index, item in enumerate(old) if item not in new_index)
    insertions = tuple(index for index, item in enumerate(new) if item not in set(old))
    kept = [(index, new_index[item]) for index, item in enumerate(old) if item in new_index]
    staying: set[int] = set()
    last = -1
    for position, (_, now) in enumerate(kept):  # a random increasing run stays
        if now > last and rng.random() < 0.8:
            staying.add(position)
            last = now
    moves = tuple((o, n) for position, (o, n) in enumerate(kept) if position not in staying)
    modifications = tuple((o, n) for o, n in kept if rng.random() < 0.2)
    return ChangeSet(deletions, insertions, modifications, moves)


@pytest.mark.parametrize("seed", range(40))
def test_apply_gives_the_new_window(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(250):
        universe = [f"i{n}" for n in range(rng.randint(0, 30))]
        old = rng.sample(universe, rng.randint(0, len(universe)))
        new = rng.sample(universe, rng.randint(0, len(universe)))
        changes = changes_between(old, new, rng)
        modified = {n for _, n in changes.modifications}
        result = changes.apply([(item, "old") for item in old], lambda i: (new[i], "new"), size=len(new))
        assert [item for item, _ in result] == new
        for index, (_, version) in enumerate(result):
            fresh = index in modified or new[index] not in old
            assert version == ("new" if fresh else "old")


def test_changes_that_do_not_fit_are_refused() -> None:
    old = ["a", "b", "c"]
    item = lambda i: "x"  # noqa: E731
    with pytest.raises(ChangeSetMismatch):
        ChangeSet(deletions=(3,)).apply(old, item)
    with pytest.raises(ChangeSetMismatch):
        ChangeSet(insertions=(5,)).apply(old, item)
    with pytest.raises(ChangeSetMismatch):
        ChangeSet(deletions=(0,), moves=((0, 1),)).apply(old, item)
    with pytest.raises(ChangeSetMismatch):
        ChangeSet(insertions=(0,)).apply(old, item, size=3)
    with pytest.raises(ChangeSetMismatch):
        ChangeSet(modifications=((0, 0),), deletions=(0,)).apply(old, item)
    with pytest.raises(ChangeSetMismatch):
        ChangeSet.from_json({"deletions": ["0"]})
