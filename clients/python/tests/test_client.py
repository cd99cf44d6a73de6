# Licensed under the Apache License, Version 2.0.
"""The Python client against the real livegated and livegate-cloud: a remote change, a pending local write and a
daemon restart, end to end, through the blocking and the asyncio APIs."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import TypedDict

import pytest
from conftest import Stack, wait_until

import livegate
import livegate.aio
from livegate import CollectionState, ObjectState


def test_the_package_tested_is_the_wheel_when_one_is_given() -> None:
    wheel = os.environ.get("LIVEGATE_PYTHON_WHEEL")
    if wheel is None:
        pytest.skip("run from the source tree (scripts/python-client tests the wheel)")
    assert livegate.__file__ is not None and livegate.__file__.startswith(wheel + os.sep)


def versions_never_go_back(states: list[ObjectState]) -> None:
    versions = [state.version or 0 for state in states]
    assert versions == sorted(versions), versions


def test_blocking_object_follows_remote_changes_a_pending_write_and_a_daemon_restart(stack: Stack) -> None:
    stack.remote_put("notes", "n1", {"text": "from the cloud"})
    with livegate.Client(stack.socket, client="pytest") as daemon:
        assert daemon.hello()["protocol"] == 1
        seen: list[ObjectState] = []

        def record(state: ObjectState) -> bool:
            seen.append(state)
            return True

        with daemon.observe_object("notes", "n1") as note:
            first = note.wait_for(lambda s: record(s) and s.data_status == "fresh")
            assert (first.version, first.data) == (1, {"text": "from the cloud"})

            # A remote change arrives live.
            stack.remote_put("notes", "n1", {"text": "edited remotely"})
            edited = note.wait_for(lambda s: record(s) and s.version == 2)
            assert edited.data == {"text": "edited remotely"} and edited.loading_status == "loaded"

            # A local write shows at once, pending, while the cloud cannot confirm it; then the cloud's version.
            stack.pause_cloud()
            try:
                assert daemon.update("notes", "n1", {"text": "written here"}, wait=False) is None
                pending = note.wait_for(lambda s: record(s) and s.pending_writes)
                assert pending.data == {"text": "written here"} and pending.version == 2
                assert daemon.stats()["pendingWrites"] == 1
            finally:
                stack.resume_cloud()
            confirmed = note.wait_for(lambda s: record(s) and not s.pending_writes and s.version == 3)
            assert confirmed.data == {"text": "written here"} and confirmed.data_status == "fresh"

            # The daemon restarts: the observation goes loading, comes back, and follows the next change.
            stack.restart_daemon()
            note.wait_for(lambda s: record(s) and s.loading_status == "loading")
            wait_until("the client to reconnect", lambda: daemon.is_connected)
            stack.remote_put("notes", "n1", {"text": "after the restart"})
            after = note.wait_for(lambda s: record(s) and s.version == 4 and s.loading_status == "loaded")
            assert after.data == {"text": "after the restart"}
        versions_never_go_back(seen)
        # Each version's data reached the observer once, apart from the pending write's own.
        confirmed_versions = [s.version for s in seen if not s.pending_writes and s.loading_status == "loaded"]
        assert confirmed_versions == sorted(set(confirmed_versions)), confirmed_versions


def test_an_object_resumes_from_its_version_across_daemon_kills_under_writes(stack: Stack) -> None:
    """Re-observed with ``sinceVersion``: nothing told twice, a skip only after a resync notice, and an object
    unchanged across a restart back to ``loaded`` at its version."""
    stack.remote_put("notes", "k1", {"n": 0})
    written = [1]
    stop_writing = threading.Event()

    def write_on() -> None:
        while not stop_writing.is_set():
            stack.remote_put("notes", "k1", {"n": written[0]})
            written[0] += 1
            time.sleep(0.02)

    with livegate.Client(stack.socket, client="pytest") as daemon:
        seen: list[ObjectState] = []

        def record(state: ObjectState) -> bool:
            seen.append(state)
            return True

        with daemon.observe_object("notes", "k1") as note:
            note.wait_for(lambda s: record(s) and s.data_status == "fresh")
            writer = threading.Thread(target=write_on)
            writer.start()
            try:
                for round in range(3):
                    time.sleep(0.3)
                    stack.kill_daemon()
                    time.sleep(0.3)
                    if round == 1:  # no cache: the restarted daemon fetches, past the versions written meanwhile
                        shutil.rmtree(stack.work / "state")
                    stack.start_daemon()
                    note.wait_for(lambda s: record(s) and s.loading_status == "loaded", 30)
            finally:
                stop_writing.set()
                writer.join()
            last = stack.remote_put("notes", "k1", {"n": "last"})["version"]
            note.wait_for(lambda s: record(s) and s.version == last and s.loading_status == "loaded", 30)

            # Unchanged across a restart: loading, then loaded again at the same version, the data not told again.
            stack.kill_daemon()
            note.wait_for(lambda s: record(s) and s.loading_status == "loading", 30)
            stack.start_daemon()
            back = note.wait_for(lambda s: record(s) and s.loading_status == "loaded", 30)
            assert back.version == last and back.data == {"n": "last"} and back.data_status == "fresh"

    versions_never_go_back([s for s in seen if s.snapshot is not None])
    # Each version told fresh and loaded once; again only as the return of an unchanged object after a loss
    # (loading between), with the same data.
    told: dict[int, object] = {}
    lost_since = False
    for state in seen:
        if state.loading_status == "loading":
            lost_since = True
        if state.snapshot is None or state.pending_writes or state.data_status != "fresh" or state.loading_status != "loaded":
            continue
        if state.snapshot.version in told:
            assert lost_since and told[state.snapshot.version] == state.data, [(s.version, s.loading_status) for s in seen]
        told[state.snapshot.version] = state.data
        lost_since = False
    # A skip only after a resync notice.
    previous: int | None = None
    resynced = False
    skips = 0
    for state in seen:
        if state.resync:
            resynced = True
            continue
        if state.snapshot is None or state.pending_writes:
            continue
        version = state.snapshot.version
        if previous is not None and version > previous + 1:
            skips += 1
            assert resynced, f"v{previous} to v{version} without a resync notice: {[(s.version, s.resync) for s in seen]}"
        previous, resynced = version, False
    assert skips >= 1  # the round without a cache skipped what was written meanwhile


def test_callbacks_and_link_events(stack: Stack) -> None:
    """``on_change`` (Firestore's ``on_snapshot``): the state now, then each change, until unsubscribed; ``on_end``
    when the observation ends. ``on_link_change``: connected, the daemon's session, reconnecting and connected
    again across a restart, closed."""
    stack.remote_put("notes", "cb", {"n": 1})
    states: list[ObjectState] = []
    ends: list[livegate.LiveGateError | None] = []
    events: list[livegate.LinkEvent] = []
    got = threading.Event()
    with livegate.Client(stack.socket, client="pytest") as daemon:
        stop_link = daemon.on_link_change(events.append)
        with daemon.observe_object("notes", "cb") as note:
            note.wait_for(lambda s: s.data_status == "fresh")
            unsubscribe = note.on_change(lambda s: (states.append(s), got.set()), ends.append)
            assert got.wait(10) and states[0].version == 1, "the state now, at once"
            stack.remote_put("notes", "cb", {"n": 2})
            wait_until("v2 through the callback", lambda: any(s.version == 2 for s in states))
            unsubscribe()
            stack.remote_put("notes", "cb", {"n": 3})
            note.wait_for(lambda s: s.version == 3)  # emitted to the callbacks in the same step as to the iterator
            assert all(s.version in (1, 2) for s in states), [s.version for s in states]
            note.on_change(lambda s: None, ends.append)
        wait_until("on_end at the close", lambda: ends == [None])

        wait_until("the session", lambda: any(e.kind == "session" and e.session == "established" for e in events))
        stack.restart_daemon()
        wait_until("reconnecting, then connected again", lambda: [e.kind for e in events if e.kind != "session"][-2:] == ["reconnecting", "connected"])
        stop_link()
    kinds = [e.kind for e in events if e.kind != "session"]
    assert kinds == ["connected", "reconnecting", "connected"], kinds  # unsubscribed before the close


def test_errors_carry_the_daemons_code_and_message(stack: Stack) -> None:
    with livegate.Client(stack.socket, client="pytest") as daemon:
        daemon.create("notes", "e1", {"n": 1})
        with pytest.raises(livegate.VersionConflict) as conflict:
            daemon.update("notes", "e1", {"n": 2}, if_version=7)
        assert conflict.value.code == -32005 and conflict.value.current_version == 1
        with pytest.raises(livegate.VersionConflict):
            daemon.create("notes", "e1", {"n": 3})
        with pytest.raises(livegate.InvalidParams) as invalid:
            daemon.observe_object("no/such", "x")
        assert invalid.value.code == -32602 and "collection" in invalid.value.message
        with pytest.raises(livegate.NotFound):
            daemon.delete("notes", "never-made")
        with pytest.raises(livegate.MethodNotFound):
            daemon.request("object.frobnicate", {})
        assert daemon.delete("notes", "e1") == 2
        # The cloud's refusal, said once: who may not do what, and what to change.
        with pytest.raises(livegate.NotPermitted) as refused:
            daemon.send("songs", "bob", "hi")
        message = refused.value.message
        assert message == (
            "the cloud refused: tester may not send to bob on the stream songs: "
            "bob's ACL does not list tester among its publishers"
        ), message


def test_a_released_observation_ends_its_token(stack: Stack) -> None:
    with livegate.Client(stack.socket, client="pytest") as daemon:
        note = daemon.observe_object("notes", "r1")
        note.wait_for(lambda s: s.loading_status == "loaded")
        assert daemon.stats()["tokens"] == 1
        with daemon.observe_object("notes", "r2"):
            assert daemon.stats()["tokens"] == 2
        assert daemon.stats()["tokens"] == 1  # ended by `with`
        del note
        gc.collect()
        wait_until("the released token to end", lambda: daemon.stats()["tokens"] == 0, timeout=10)


def test_one_thread_follows_several_observations_in_the_order_their_states_arrived(stack: Stack) -> None:
    """``select`` waits for the next state of any of several observations; ``each`` iterates them all, each state
    with its observation, until every one has ended (one closed, the others go on)."""
    stack.remote_put("notes", "s1", {"n": 1})
    stack.remote_put("notes", "s2", {"n": 1})
    with livegate.Client(stack.socket, client="pytest") as daemon:
        one = daemon.observe_object("notes", "s1")
        two = daemon.observe_object("notes", "s2")
        window = daemon.observe_collection("notes", sort="n", page_size=5)
        one.wait_for(lambda s: s.loading_status == "loaded")
        two.wait_for(lambda s: s.loading_status == "loaded")
        window.wait_for(lambda s: s.loading_status == "loaded" and len(s.items) == 2)
        with pytest.raises(TimeoutError):
            daemon.select([one, two], timeout=0.2)  # every state so far read: nothing new

        stack.remote_put("notes", "s2", {"n": 2})
        observation, state = daemon.select([one, two], timeout=10)
        assert observation is two and state.version == 2
        stack.remote_put("notes", "s1", {"n": 2})
        observation, state = daemon.select([one, two], timeout=10)
        assert observation is one and state.version == 2

        # Arrival order across observations: s2's v3 arrives first, then s1's v3, both unread; select gives them so.
        stack.remote_put("notes", "s2", {"n": 3})
        wait_until("s2 v3 to arrive", lambda: two.latest is not None and two.latest.version == 3)
        stack.remote_put("notes", "s1", {"n": 3})
        wait_until("s1 v3 to arrive", lambda: one.latest is not None and one.latest.version == 3)
        observation, state = daemon.select([one, two], timeout=10)
        assert observation is two and state.version == 3, (observation is two, state)
        observation, state = daemon.select([one, two], timeout=10)
        assert observation is one and state.version == 3, (observation is one, state)
        stack.remote_put("notes", "s2", {"n": 4})
        stack.remote_put("notes", "s1", {"n": 4})
        one.wait_for(lambda s: s.version == 4)
        two.wait_for(lambda s: s.version == 4)
        # Another client's observation is not this client's to wait on.
        with livegate.Client(stack.socket, client="pytest-other") as other:
            with other.observe_object("notes", "s1") as foreign:
                with pytest.raises(ValueError):
                    daemon.select([one, foreign], timeout=1)
        # Those were read by wait_for; the window's states were not: each() gives them, then ends with them all.
        seen: list[tuple[str, int]] = []
        one.close()
        two.close()
        for observation, state in daemon.each(one, two, window):
            assert observation is window and isinstance(state, CollectionState)
            seen.append(("window", len(state.items)))
            if [item.data["n"] for item in state.items] == [4, 4]:
                window.close()
        assert seen and seen[-1] == ("window", 2), seen
        with pytest.raises(StopIteration):
            daemon.select([one, two, window], timeout=1)


def test_typed_data_through_a_dataclass_or_a_typed_dict(stack: Stack) -> None:
    @dataclasses.dataclass
    class Note:
        text: str
        likes: int = 0

    class NoteDict(TypedDict):
        text: str

    stack.remote_put("notes", "t1", {"text": "hello", "extra": True})
    with livegate.Client(stack.socket, client="pytest") as daemon:
        with daemon.observe_object("notes", "t1") as note:
            state = note.wait_for(lambda s: s.data_status == "fresh")
            assert state.data_as(Note) == Note(text="hello")  # a member the class does not name is left out
            typed: NoteDict | None = state.data_as(NoteDict)
            assert typed == {"text": "hello", "extra": True}
        with daemon.observe_object("notes", "none") as absent:
            assert absent.wait_for(lambda s: s.loading_status == "loaded").data_as(Note) is None
    class Partial(TypedDict, total=False):
        text: str
        likes: int

    assert state.data_as(Partial) == {"text": "hello", "extra": True}  # no required key

    stack.remote_put("notes", "t2", {"title": "no text"})
    with livegate.Client(stack.socket, client="pytest") as daemon:
        with daemon.observe_object("notes", "t2") as wrong:
            state = wrong.wait_for(lambda s: s.data_status == "fresh")
            with pytest.raises(TypeError, match=r"notes/t2 v1 is not a Note: it lacks text"):
                state.data_as(Note)
            with pytest.raises(TypeError, match=r"notes/t2 v1 is not a NoteDict: it lacks text"):
                state.data_as(NoteDict)


def test_a_refused_connection_says_so(stack: Stack) -> None:
    with pytest.raises(livegate.DaemonUnavailable) as unavailable:
        livegate.Client(stack.socket + ".missing", client="pytest", timeout=0.5)
    assert ".missing" in unavailable.value.message


def window_of(stack_items: dict[str, int], page_items: int) -> list[str]:
    return [id for id, _ in sorted(stack_items.items(), key=lambda pair: (pair[1], pair[0]))][:page_items]


def test_asyncio_collection_window_follows_changes_pending_writes_and_a_restart(stack: Stack) -> None:
    ranks = {"m1": 30, "m2": 10, "m3": 20, "m4": 40, "m5": 50}
    for id, rank in ranks.items():
        stack.remote_put("messages", id, {"channel": "c1", "rank": rank})
    stack.remote_put("messages", "other", {"channel": "c2", "rank": 1})

    async def run() -> None:
        async with await livegate.aio.Client.connect(stack.socket, client="pytest") as daemon:
            states: list[CollectionState] = []
            window = await daemon.observe_collection("messages", where={"channel": "c1"}, sort="rank", page_size=2)
            window.on_change(states.append)
            async with window:
                fresh = await window.wait_for(lambda s: s.data_status == "fresh" and s.loading_status == "loaded", 30)
                assert fresh.ids == ["m2", "m3"] and fresh.count == 5 and fresh.has_next

                assert await window.next_page()
                paged = await window.wait_for(lambda s: len(s.items) == 4, 30)
                assert paged.ids == window_of(ranks, 4)

                # A remote change moves an item inside the window.
                ranks["m4"] = 5
                stack.remote_put("messages", "m4", {"channel": "c1", "rank": 5})
                moved = await window.wait_for(lambda s: s.ids[:1] == ["m4"], 30)
                assert moved.ids == window_of(ranks, 4) and moved.count == 5

                # A local write shows at once at its place, pending, then confirmed.
                stack.pause_cloud()
                try:
                    await daemon.update("messages", "m6", {"channel": "c1", "rank": 1}, wait=False)
                    pending = await window.wait_for(lambda s: "m6" in s.pending_ids, 30)
                    assert pending.ids[0] == "m6" and len(pending.items) == 4
                finally:
                    stack.resume_cloud()
                ranks["m6"] = 1
                confirmed = await window.wait_for(lambda s: not s.pending_ids and s.count == 6, 30)
                assert confirmed.ids == window_of(ranks, 4)

                # The daemon restarts: the window goes loading, then comes back whole (reset) with its two pages.
                before = len(states)
                await asyncio.to_thread(stack.restart_daemon)
                await window.wait_for(lambda s: s.loading_status == "loading", 30)
                # The first confirmed state after the restart is the whole window (a daemon that paged from its
                # stale cached page joined it to a fresh one and called the mix fresh).
                back = await window.wait_for(lambda s: s.loading_status == "loaded", 30)
                assert back.ids == window_of(ranks, 4) and back.count == 6
                restored = states[before:]
                assert any(s.reset for s in restored)
                # Whole at every step: never a page, then the other (it asks for both in its collection.observe),
                # and never the new token's empty placeholder.
                assert [len(s.items) for s in restored] == [4] * len(restored), [(s.ids, s.loading_status) for s in restored]

                ranks["m5"] = 2
                stack.remote_put("messages", "m5", {"channel": "c1", "rank": 2})
                after = await window.wait_for(lambda s: "m5" in s.ids, 30)
                assert after.ids == window_of(ranks, 4)
                for state in states:  # every state this client built matches the daemon's size and order rules
                    assert len(state.items) <= 4
                assert window.mismatches == 0

    asyncio.run(run())


def test_a_feed_iterated_after_an_await_still_starts_with_ready(stack: Stack) -> None:
    """The events before the first listener are kept for it: ``ready`` may arrive with the subscription's answer,
    before the app's ``async for`` begins."""

    async def run() -> None:
        async with await livegate.aio.Client.connect(stack.socket, client="pytest") as daemon:
            async with await daemon.subscribe_feed("notes") as feed:
                # The feed's ready arrives while the app awaits something else (requests until it has).
                for _ in range(3000):
                    if feed.latest is not None:
                        break
                    await daemon.stats()
                assert feed.latest is not None and feed.latest.event == "ready", "no ready within 3000 round trips"
                events = feed.__aiter__()
                first = await asyncio.wait_for(events.__anext__(), 30)
                assert first.event == "ready", first
                await daemon.update("notes", "f1", {"n": 1})
                change = await asyncio.wait_for(events.__anext__(), 30)
                assert change.event == "next" and change.snapshot is not None and change.snapshot.id == "f1", change

    asyncio.run(run())


def test_asyncio_feed_and_stream(stack: Stack) -> None:
    async def run() -> None:
        async with await livegate.aio.Client.connect(stack.socket, client="pytest") as daemon:
            feed = await daemon.subscribe_feed("songs")
            events = feed.__aiter__()
            assert (await asyncio.wait_for(events.__anext__(), 30)).event == "ready"
            stack.remote_put("songs", "s1", {"title": "Blackbird"})
            change = await asyncio.wait_for(events.__anext__(), 30)
            assert change.event == "next" and change.snapshot is not None and change.snapshot.data["title"] == "Blackbird"
            stack.remote_delete("songs", "s1")
            deletion = await asyncio.wait_for(events.__anext__(), 30)
            assert deletion.deleted and deletion.seq > change.seq

            await daemon.grant_access("songs", "tester", publishers=["tester"], subscribers=["tester"])
            assert (await daemon.access("songs", "tester"))["publishers"] == ["tester"]
            listener = await daemon.listen("songs")
            messages = listener.__aiter__()
            sent = await daemon.send("songs", "tester", {"hello": 1})
            heard = await asyncio.wait_for(messages.__anext__(), 30)
            assert heard.is_message and heard.message == {"hello": 1} and heard.seq == sent["seq"]
            with pytest.raises(livegate.NotFound):
                await daemon.send("no-such-stream", "tester", {})

            # After a daemon restart, both say that what happened meanwhile was not replayed.
            await asyncio.to_thread(stack.restart_daemon)
            while (await asyncio.wait_for(events.__anext__(), 30)).event != "resync":
                pass
            assert (await asyncio.wait_for(messages.__anext__(), 30)).resync
            while (await asyncio.wait_for(events.__anext__(), 30)).event != "ready":
                pass  # every change from the new subscription's `ready` on is delivered
            stack.remote_put("songs", "s2", {"title": "Yesterday"})
            while True:
                event = await asyncio.wait_for(events.__anext__(), 30)
                if event.event == "next":
                    assert event.snapshot is not None and event.snapshot.id == "s2"
                    break
            await feed.close()
            await listener.close()

    asyncio.run(run())


def test_values_round_trip_exactly(stack: Stack) -> None:
    """Integers of any size, floats, and names that differ only by Unicode normalization come back as written."""
    nfc, nfd = "\u00e9", "e\u0301"
    data: dict[str, object] = {
        "big": 10000000000000000999,
        "neg": -123123123123123123123123123123,
        "id": 9007199254740993,
        "min": -9223372036854775808,
        "f": 1.0,
        nfc: 1,
        nfd: 2,
    }
    # Through the cloud's REST API: a float written with an exponent comes back written out, still a float.
    stack.remote_put("values", "r1", {"e": 1e6, **data})
    with livegate.Client(stack.socket, client="pytest-values") as daemon:
        with daemon.observe_object("values", "r1") as remote:
            fresh = remote.wait_for(lambda s: s.data_status == "fresh")
            assert fresh.data == {"e": 1000000.0, **data}
            assert isinstance(fresh.data["e"], float) and isinstance(fresh.data["f"], float)
            assert isinstance(fresh.data["big"], int)
            assert len(fresh.data) == 8
        # Through the daemon.
        snapshot = daemon.update("values", "d1", data)
        assert snapshot is not None and snapshot.data == data
        with daemon.observe_object("values", "d1", policy="freshOnly") as written:
            state = written.wait_for(lambda s: s.data_status == "fresh")
            assert state.data == data and isinstance(state.data["f"], float)


def test_no_socket_fails_at_once_and_errors_say_their_cause_once(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(livegate.DaemonUnavailable) as missing:
        livegate.Client(str(tmp_path / "none.sock"), timeout=10)
    assert time.monotonic() - started < 2, "no socket: nothing to wait for"
    assert "no livegated socket at" in missing.value.message
    # A socket file nobody listens on (a daemon that died): the cause once, not the same sentence twice.
    stale = str(tmp_path / "stale.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(stale)
    listener.close()
    with pytest.raises(livegate.DaemonUnavailable) as refused:
        livegate.Client(stale, timeout=0.5)
    assert refused.value.message.count("is not reachable") == 1, refused.value.message


def test_installs_into_a_virtual_environment_writing_nothing_into_the_checkout(tmp_path: Path) -> None:
    """README: ``pip install ./clients/python`` into a virtual environment; the build (flit_core) writes nothing into
    the source tree, so a read-only checkout installs. Offline here: the venv sees Debian's flit_core."""
    source = Path(__file__).resolve().parents[1]
    checkout = tmp_path / "checkout"
    shutil.copytree(source, checkout, ignore=shutil.ignore_patterns(".mypy_cache", "__pycache__", ".pytest_cache"))

    def tree() -> dict[str, float]:
        return {str(path.relative_to(checkout)): path.stat().st_mtime for path in checkout.rglob("*")}

    before = tree()
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}  # the venv's own livegate
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--no-build-isolation", "--no-index", str(checkout)],
        check=True,
        cwd=tmp_path,
        env=env,
    )
    assert tree() == before, "the install wrote into the checkout"
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import livegate; print(livegate.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    ).stdout.strip()
    assert where.startswith(str(venv)), where
