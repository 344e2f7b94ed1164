"""A fork server for crash tests: a fresh interpreter that has imported everything once and
forks a crash child on request, so a kill costs milliseconds and the children never inherit
the test process's threads or state.

Protocol, one line each way (the parent kills children by pid; this process reaps them):

- ``run URL SESSION_ID SEED MARKER`` → ``pid N``, then ``ready`` once the child's agent is
  constructed, or ``gone`` if it died first;
- ``reap N`` → ``status S`` (the raw ``waitpid`` status).
"""

from __future__ import annotations

import os
import select
import sys

from tests.agent_children.crash_child import child_main


def _answer(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _run(url: str, session_id: str, seed: str, marker: str) -> None:
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        child_main(url, session_id, int(seed), marker, ready_w)
    os.close(ready_w)
    _answer(f"pid {pid}")
    try:
        readable, _, _ = select.select([ready_r], [], [], 60)
        got = os.read(ready_r, 1) if readable else b""
    finally:
        os.close(ready_r)
    _answer("ready" if got else "gone")


def main() -> None:
    for line in sys.stdin:
        command, *args = line.split()
        if command == "run":
            _run(*args)
        elif command == "reap":
            _, status = os.waitpid(int(args[0]), 0)
            _answer(f"status {status}")


if __name__ == "__main__":
    main()
