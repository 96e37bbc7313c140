# SPDX-License-Identifier: MIT
"""python -m weblocks.demo - two processes share one lock.

Process A holds "document"; process B asks for it and waits; A shows the
bucket's state (query()), releases, and B is granted. A's next request
times out while B holds the lock; then A waits for it again and kills B:
the dead process's lock is released and A is granted.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from . import LockManager, TimeoutError, remove_bucket


def _say(who: str, text: str) -> None:
    print(f"{who}: {text}", flush=True)


def _child(origin: str) -> int:
    with LockManager(origin) as locks:
        _say("B", f"pid {os.getpid()}, client {locks.client_id[:8]}…, "
             "requesting 'document'")
        with locks.request("document") as lock:
            _say("B", f"granted 'document' (token {lock.token}); holding it")
            sys.stdin.read()  # until A closes the pipe (or kills B)
    return 0


def _wait_pending(locks: LockManager, n: int) -> None:
    end = time.monotonic() + 10
    while len(locks.query().pending) < n:
        if time.monotonic() > end:
            raise SystemExit("demo: B's request never showed up")
        time.sleep(0.005)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return _child(sys.argv[2])
    origin = f"https://demo-{os.getpid()}.example"
    with LockManager(origin) as locks:
        with locks.request("document") as lock:
            _say("A", f"pid {os.getpid()}, client {locks.client_id[:8]}…, "
                 f"holds 'document' (token {lock.token})")
            b = subprocess.Popen([sys.executable, "-m", "weblocks.demo",
                                  "--child", origin],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
            assert b.stdout is not None
            print(b.stdout.readline(), end="", flush=True)
            _wait_pending(locks, 1)
            snap = locks.query()
            _say("A", "query():")
            for kind, entries in (("held", snap.held),
                                  ("pending", snap.pending)):
                for e in entries:
                    print(f"     {kind:8} {e.name!r} {e.mode} client "
                          f"{e.client_id[:8]}… pid {e.pid}")
            _say("A", "releasing 'document'")
        print(b.stdout.readline(), end="", flush=True)
        try:
            with locks.request("document", timeout=0.2):
                pass
        except TimeoutError:
            _say("A", "request with timeout=0.2: TimeoutError (B holds it)")

        def kill_b() -> None:
            _wait_pending(locks, 1)
            _say("A", f"(another thread) SIGKILL to B, pid {b.pid}")
            b.send_signal(signal.SIGKILL)

        threading.Thread(target=kill_b).start()
        _say("A", "requesting 'document' again, waiting…")
        t0 = time.monotonic()
        with locks.request("document") as lock:
            _say("A", f"granted 'document' (token {lock.token}) "
                 f"{(time.monotonic() - t0) * 1000:.1f} ms after asking: "
                 "the dead process's lock was released")
        b.wait()
    remove_bucket(origin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
