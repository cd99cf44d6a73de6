# Licensed under the Apache License, Version 2.0.
"""Runs the examples of the READMEs, as written, against the demo's running cloud and daemon.

Every ``sh`` and ``python`` block of the files given runs, unless the line right before it is an HTML comment
``<!-- example: not run: REASON -->`` (a command that installs, needs a booted systemd, or runs for minutes: each
says which test or script covers it instead). ``<!-- example: each line runs until interrupted -->`` runs each
line of the block on its own and expects it still running after a few seconds (a ``watch`` that follows changes
until Ctrl-C): a command that fails ends at once. ``<!-- example: prints TEXT -->`` runs the block and expects
TEXT in its output (the demo's data reached it). Blocks in other languages (Swift, C) are fragments of programs: they are
listed, not run (ClientPackageTests builds README's Swift example into an app; the C example program is tested
under valgrind).

Blocks run in a temporary directory with ``LIVEGATE_SOCKET`` set to the demo's daemon, its binaries first on
``PATH``, the Python client's wheel on ``PYTHONPATH``, and one newline on standard input (a person pressing Enter).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = re.compile(r"<!--\s*example:\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
TIMEOUT = 60.0
UNTIL_INTERRUPTED = 3.0


def blocks(path: Path) -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, marker) for each fenced block of ``path``."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.fullmatch(before.strip())
        found.append((line, match.group(1), match.group(2), marker.group(1) if marker else None))
    return found


def run(command: list[str], code: str, env: dict[str, str], cwd: str, timeout: float) -> tuple[int | None, str]:
    """The exit status (``None``: still running at ``timeout``, then killed) and the output."""
    process = subprocess.Popen(
        command + [code],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate("\n", timeout=timeout)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, 9)
        except ProcessLookupError:  # it ended meanwhile
            pass
        output, _ = process.communicate()
        return None, output


def main() -> int:
    files = [Path(name) for name in sys.argv[1:]]
    env = dict(os.environ)
    ran = skipped = failed = 0
    with tempfile.TemporaryDirectory(prefix="livegate-examples.") as cwd:
        for path in files:
            for line, language, code, marker in blocks(path):
                where = f"{path}:{line}"
                if marker is not None and marker.startswith("not run:"):
                    skipped += 1
                    print(f"    skip  {where} ({language}): {marker[len('not run:'):].strip()}")
                    continue
                if language not in ("sh", "python"):
                    skipped += 1
                    print(f"    skip  {where} ({language or 'text'}): a fragment of a program, not run here")
                    continue
                shell = ["bash", "-euo", "pipefail", "-c"]
                interpreter = shell if language == "sh" else ["/usr/bin/python3", "-c"]
                if marker == "each line runs until interrupted":
                    assert language == "sh", f"{where}: only shell lines run until interrupted"
                    for command in [l for l in code.splitlines() if l.strip() and not l.lstrip().startswith("#")]:
                        status, output = run(shell, command, env, cwd, UNTIL_INTERRUPTED)
                        if status is not None:
                            failed += 1
                            print(f"    FAIL  {where}: `{command}` was to run until interrupted: exit {status}\n{output}")
                        else:
                            print(f"    ok    {where}: `{command.split('#')[0].strip()}` runs, printing {len(output.splitlines())} lines")
                    ran += 1
                    continue
                expected = marker[len("prints ") :] if marker is not None and marker.startswith("prints ") else None
                assert marker is None or expected, f"{where}: unknown example marker {marker!r}"
                status, output = run(interpreter, code, env, cwd, TIMEOUT)
                ran += 1
                if status == 0 and expected is not None and expected not in output:
                    failed += 1
                    print(f"    FAIL  {where} ({language}): its output lacks {expected!r}\n{output}")
                elif status != 0:
                    failed += 1
                    print(f"    FAIL  {where} ({language}): exit {status}\n{output}")
                else:
                    print(f"    ok    {where} ({language}), {len(output.splitlines())} lines of output")
    print(f"==> examples: {ran} run, {failed} failed, {skipped} not run (each with its reason)")
    return 1 if failed or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
