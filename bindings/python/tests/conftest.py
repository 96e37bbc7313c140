# SPDX-License-Identifier: MIT
"""Fixtures: the library under test, one bucket per test, peer processes.

WEBLOCKS_LIBRARY names the libweblocks.so to test (check.sh sets it to the
build's); without it the installed library is used.
"""
from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional

import pytest

import weblocks

HERE = Path(__file__).resolve().parent
# The project's source tree: its include/ for the C peer, bindings/node.
SRCDIR = Path(os.environ.get("WEBLOCKS_SRCDIR") or HERE.parents[2])
WAIT = 10.0  # seconds: the bound of every wait for another party


def pytest_report_header(config: pytest.Config) -> str:
    lib = weblocks.load_library()
    return (f"weblocks: package {Path(weblocks.__file__).parent}, library "
            f"{lib._name} ({'.'.join(map(str, weblocks.version()))})")


def pytest_configure(config: pytest.Config) -> None:
    # check.sh looks for segments of this process's test buckets.
    pidfile = os.environ.get("WEBLOCKS_TEST_PIDFILE")
    if pidfile:
        Path(pidfile).write_text(str(os.getpid()))


@pytest.fixture
def origin(request: pytest.FixtureRequest) -> str:
    """A bucket of this test alone, removed afterwards (and checked: a
    bucket still open by anyone fails the test)."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:60]
    o = f"https://t-{os.getpid()}-{name}"
    weblocks.remove_bucket(o)
    yield o
    weblocks.remove_bucket(o)


def wait_until(cond: Callable[[], bool], what: str,
               timeout: float = WAIT) -> None:
    """Wait for a condition of the shared lock state (such as a request
    showing in query()); the timeout only bounds the wait."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def pending_names(locks: weblocks.LockManager) -> List:
    return [p.name for p in locks.query().pending]


class Peer:
    """A process speaking the peer protocol (tests/peers/PROTOCOL):
    commands on its stdin, one event per line on its stdout."""

    def __init__(self, argv: List[str], env: Optional[dict] = None) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env,
                                     text=True, bufsize=1)
        self._buf = b""  # read with os.read: select() sees no buffered data
        ready = self.expect("ready")
        self.client_id, self.pid = ready[1], int(ready[2])

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = WAIT) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        while b"\n" not in self._buf:
            r, _, _ = select.select([fd], [], [],
                                    max(0.0, end - time.monotonic()))
            if not r:
                raise AssertionError(f"peer {self.proc.args}: no output "
                                     f"for {timeout} s")
            data = os.read(fd, 65536)
            if not data:
                raise AssertionError(f"peer {self.proc.args} exited "
                                     f"({self.proc.wait()})")
            self._buf += data
        s, self._buf = self._buf.split(b"\n", 1)
        return s.decode()

    def expect(self, word: str, timeout: float = WAIT) -> List[str]:
        s = self.line(timeout)
        parts = s.split(" ")
        assert parts[0] == word, f"expected {word!r}, peer said {s!r}"
        return parts

    def silent(self, timeout: float) -> bool:
        """True if the peer says nothing within timeout (a negative check:
        it only ever passes by waiting the whole time)."""
        assert self.proc.stdout is not None
        if self._buf:
            return False
        r, _, _ = select.select([self.proc.stdout.fileno()], [], [], timeout)
        return not r

    def query(self) -> dict:
        self.send("query")
        out: dict = {"held": [], "pending": []}
        while True:
            parts = self.line().split(" ")
            if parts[0] == "end":
                return out
            out[parts[0]].append((parts[1], parts[2], parts[3]))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT)

    def close(self) -> int:
        if self.proc.poll() is None:
            try:
                self.send("exit")
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f:
                f.close()
        return self.proc.returncode


@pytest.fixture
def peers():
    """Start peers with peers(argv); all are ended after the test."""
    started: List[Peer] = []

    def start(argv: List[str]) -> Peer:
        p = Peer(argv)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


def python_peer(origin: str) -> List[str]:
    return [sys.executable, str(HERE / "peers" / "peer.py"), origin]


@pytest.fixture(autouse=True)
def no_request_left_behind():
    """Every asynchronous request a test made has completed by its end
    (its callback ran: granted, aborted, cancelled or closed)."""
    from weblocks import manager
    yield
    assert manager._pending == {}, "asynchronous requests left outstanding"
