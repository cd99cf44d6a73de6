# Licensed under the Apache License, Version 2.0.
"""Fixtures that start the real livegate-cloud (SQLite) and livegated binaries in a temporary directory.

The binaries come from ``$LIVEGATE_BIN_DIR`` (``scripts/test`` sets it), else ``swift build --show-bin-path``."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]


def bin_dir() -> Path:
    configured = os.environ.get("LIVEGATE_BIN_DIR")
    if configured:
        return Path(configured)
    path = subprocess.run(["swift", "build", "--show-bin-path"], cwd=REPO, check=True, capture_output=True, text=True)
    return Path(path.stdout.strip())


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class Stack:
    """livegate-cloud on SQLite and livegated in front of it, as a user would run them, in ``work``."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.bin = bin_dir()
        self.socket = str(work / "livegate.sock")
        self.password = secrets.token_hex(12)
        (work / "users").write_text(f"tester:{self.password}\n")
        (work / "password").write_text(self.password + "\n")
        os.chmod(work / "users", 0o600)
        os.chmod(work / "password", 0o600)
        self.cloud: subprocess.Popen[bytes] | None = None
        self.daemon: subprocess.Popen[bytes] | None = None
        self.cloud_url = ""
        self._access_token = ""

    def start_cloud(self) -> None:
        out = self.work / "cloud.out"
        with open(out, "wb") as stdout, open(self.work / "cloud.log", "ab") as stderr:
            self.cloud = subprocess.Popen(
                [str(self.bin / "livegate-cloud"), "--port", "0", "--database", str(self.work / "cloud.sqlite"),
                 "--users-file", str(self.work / "users"), "--stream", "songs"],
                stdout=stdout, stderr=stderr,
            )
        wait_until("livegate-cloud to listen", lambda: "listening on" in out.read_text())
        self.cloud_url = "http://" + out.read_text().split("listening on ", 1)[1].split()[0]

    def start_daemon(self) -> None:
        with open(self.work / "daemon.log", "ab") as stderr:
            self.daemon = subprocess.Popen(
                [str(self.bin / "livegated"), "--socket", self.socket, "--state-dir", str(self.work / "state"),
                 "--cloud-url", self.cloud_url, "--username", "tester", "--password-file", str(self.work / "password")],
                stdout=subprocess.DEVNULL, stderr=stderr,
            )
        wait_until("livegated to accept connections", self._daemon_accepts)

    def _daemon_accepts(self) -> bool:
        assert self.daemon is not None
        if self.daemon.poll() is not None:
            raise RuntimeError(f"livegated exited with {self.daemon.returncode}; see {self.work / 'daemon.log'}")
        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(self.socket)
                return True
            except OSError:
                return False

    def stop_daemon(self) -> None:
        assert self.daemon is not None
        self.daemon.send_signal(signal.SIGTERM)
        self.daemon.wait(timeout=30)

    def kill_daemon(self) -> None:
        """SIGKILL: the daemon stores nothing on its way out."""
        assert self.daemon is not None
        self.daemon.kill()
        self.daemon.wait(timeout=30)

    def restart_daemon(self) -> None:
        self.stop_daemon()
        self.start_daemon()

    def pause_cloud(self) -> None:
        """Freezes the cloud (SIGSTOP): the daemon's writes to it wait."""
        assert self.cloud is not None
        self.cloud.send_signal(signal.SIGSTOP)

    def resume_cloud(self) -> None:
        assert self.cloud is not None
        self.cloud.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        for process in (self.daemon, self.cloud):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    # A remote user: writes through the cloud's REST API, not through the daemon.

    def _rest(self, method: str, path: str, body: Any = None) -> Any:
        if not self._access_token and path != "/v1/auth/login":
            login = self._rest("POST", "/v1/auth/login", {"username": "tester", "password": self.password})
            self._access_token = login["accessToken"]
        request = urllib.request.Request(self.cloud_url + path, method=method)
        request.add_header("Content-Type", "application/json")
        if self._access_token:
            request.add_header("Authorization", "Bearer " + self._access_token)
        data = None if body is None else json.dumps(body).encode()
        with urllib.request.urlopen(request, data, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def remote_put(self, collection: str, id: str, data: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._rest("PUT", f"/v1/collections/{collection}/objects/{id}", {"data": data})
        return result

    def remote_delete(self, collection: str, id: str) -> None:
        self._rest("DELETE", f"/v1/collections/{collection}/objects/{id}")


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    started = Stack(tmp_path)
    try:
        started.start_cloud()
        started.start_daemon()
        yield started
    finally:
        started.stop()
