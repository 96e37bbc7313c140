# SPDX-License-Identifier: MIT
"""bench.py - weblocks against filelock and portalocker, in one run.

Two measures, each as operations per second and as a ratio to filelock:

uncontended  one process, one thread: acquire + release of one exclusive
             lock nobody else wants, N times in a row (the high-level API
             of each: with locks.request(...), with FileLock(...), with
             portalocker.Lock(...), and flock(2) through portalocker.lock
             on a file kept open).
handoff      two processes take turns: each loops "acquire; if it is my
             turn, pass the turn to the other; release" until T turns
             passed; a turn is a handoff of the lock from one process to
             the other. Measured: turns per second. weblocks queues the
             waiter and hands the lock over in FIFO order; filelock and
             portalocker.Lock poll (sleeping their default interval between
             tries), flock(2) blocks in the kernel but is not FIFO.

Usage: python3 bench.py [--quick]   (WEBLOCKS_LIBRARY as for the tests)
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from typing import Callable, Dict

import filelock
import portalocker

import weblocks


def origin_of(tag: str) -> str:
    return f"https://bench-{os.getpid()}-{tag}"


# -- the locks under test, as "take(); ...; give()" factories ----------------

def weblocks_lock(origin: str) -> Callable:
    locks = weblocks.LockManager(origin)

    def run():
        return locks.request("r")
    return run


def filelock_lock(path: str) -> Callable:
    lock = filelock.FileLock(path)
    return lambda: lock


def portalocker_lock(path: str) -> Callable:
    lock = portalocker.Lock(path, "a")
    return lambda: lock


class _Flock:
    """flock(2) on a descriptor kept open (portalocker.lock, blocking)."""

    def __init__(self, path: str) -> None:
        self.fh = open(path, "a")

    def __enter__(self):
        portalocker.lock(self.fh, portalocker.LOCK_EX)

    def __exit__(self, *exc):
        portalocker.unlock(self.fh)


def flock_lock(path: str) -> Callable:
    lock = _Flock(path)
    return lambda: lock


def uncontended_async(origin: str, n: int) -> float:
    """async with locks.request("r"), n times in one task."""
    import asyncio
    locks = weblocks.LockManager(origin)

    async def run() -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            async with locks.request("r"):
                pass
        return n / (time.perf_counter() - t0)

    rate = asyncio.run(run())
    locks.close()
    return rate


def ctypes_floor(origin: str, n: int) -> float:
    """wlk_call_acquire + wlk_call_release called through ctypes with
    nothing around them, in their cheapest form (no argument types, the
    one argument, a kept block's byref, made once): the two calls the
    plain request makes, what any ctypes binding pays at least."""
    from ctypes import byref
    from weblocks import _lib
    locks = weblocks.LockManager(origin)
    acquire = _lib.unchecked("wlk_call_acquire")
    release = _lib.unchecked("wlk_call_release")
    block = byref(_lib.Call(locks._m, b"r", 1, None, None))
    t0 = time.perf_counter()
    for _ in range(n):
        acquire(block)
        release(block)
    rate = n / (time.perf_counter() - t0)
    locks.close()
    return rate


def ctypes_floor5(origin: str, n: int) -> float:
    """The same pair as wlk_acquire (five arguments) + wlk_release, in
    their cheapest form (no argument types, every argument converted
    once, out of the loop, but the lock pointer's): what the block form
    saves."""
    from ctypes import byref, c_size_t, c_void_p
    from weblocks import _lib
    locks = weblocks.LockManager(origin)
    acquire = _lib.unchecked("wlk_acquire")
    release = _lib.unchecked("wlk_release")
    m, name_len = c_void_p.from_param(locks._m), c_size_t.from_param(1)
    out = c_void_p()
    out_arg = byref(out)
    t0 = time.perf_counter()
    for _ in range(n):
        acquire(m, b"r", name_len, None, out_arg)
        release(out)
    rate = n / (time.perf_counter() - t0)
    locks.close()
    return rate


# -- uncontended -------------------------------------------------------------

def uncontended(make: Callable[[], object], n: int) -> float:
    for _ in range(min(n, 1000)):  # warm up
        with make():
            pass
    t0 = time.perf_counter()
    for _ in range(n):
        with make():
            pass
    return n / (time.perf_counter() - t0)


# -- handoff -----------------------------------------------------------------

def _player(kind: str, where: str, me: int, turns: int, turn, ready,
            go, in_thread: bool) -> None:
    make = FACTORIES[kind](where)

    def play() -> None:
        while True:
            with make():
                t = turn.value
                if t >= turns:
                    return
                if t % 2 == me:
                    turn.value = t + 1

    ready.wait()  # both players have opened their lock
    go.wait()
    if in_thread:
        th = threading.Thread(target=play)
        th.start()
        th.join()
    else:
        play()


def handoff(kind: str, where: str, turns: int, in_thread: bool) -> float:
    ctx = mp.get_context("spawn")
    turn = ctx.Value("q", 0, lock=False)
    ready, go = ctx.Barrier(3), ctx.Event()
    procs = [ctx.Process(target=_player, args=(kind, where, i, turns, turn,
                                               ready, go, in_thread))
             for i in range(2)]
    for p in procs:
        p.start()
    ready.wait()  # both have opened their lock
    t0 = time.perf_counter()
    go.set()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - t0
    if turn.value < turns or any(p.exitcode for p in procs):
        raise RuntimeError(f"{kind}: handoff run failed")
    return turns / elapsed


FACTORIES: Dict[str, Callable[[str], Callable]] = {
    "weblocks": weblocks_lock,
    "filelock": filelock_lock,
    "portalocker": portalocker_lock,
    "flock": flock_lock,
}

LABELS = {
    "weblocks": "weblocks (with locks.request)",
    "filelock": "filelock.FileLock",
    "portalocker": "portalocker.Lock",
    "flock": "flock(2) via portalocker.lock",
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="fewer iterations (a smoke test)")
    args = ap.parse_args()
    n = 2000 if args.quick else 50000
    fast_turns = 200 if args.quick else 5000
    slow_turns = 10 if args.quick else 40  # the polling locks
    tmp = tempfile.mkdtemp(prefix="weblocks-bench-")
    where = {"weblocks": origin_of("u"),
             "filelock": os.path.join(tmp, "f.lock"),
             "portalocker": os.path.join(tmp, "p.lock"),
             "flock": os.path.join(tmp, "k.lock")}
    lib = weblocks.load_library()
    print(f"weblocks {'.'.join(map(str, weblocks.version()))} ({lib._name}),"
          f" filelock {filelock.__version__}, portalocker "
          f"{portalocker.__version__}, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs")

    rounds = 3 if args.quick else 7
    print(f"\nuncontended acquire+release, {n} in a row, one thread "
          f"(median of {rounds} rounds, the kinds taking turns)")
    made = {kind: FACTORIES[kind](where[kind]) for kind in FACTORIES}
    runs: Dict[str, list] = {kind: [] for kind in
                             list(FACTORIES) + ["async", "raw", "raw5"]}
    for _ in range(rounds):
        for kind in FACTORIES:
            runs[kind].append(uncontended(made[kind], n))
        runs["async"].append(uncontended_async(where["weblocks"], n))
        runs["raw"].append(ctypes_floor(where["weblocks"], n))
        runs["raw5"].append(ctypes_floor5(where["weblocks"], n))
    rates = {kind: sorted(r)[len(r) // 2] for kind, r in runs.items()}
    labels = dict(LABELS, raw="(floor: the two C calls via ctypes)",
                  raw5="(floor, as wlk_acquire+wlk_release)",
                  **{"async": "weblocks (async with, one task)"})
    for kind, r in rates.items():
        print(f"  {labels[kind]:34} {r:12,.0f} /s  "
              f"{r / rates['filelock']:6.1f}x filelock")
    del made
    weblocks.remove_bucket(where["weblocks"])

    print("\nhandoff between two processes (turns per second)")
    hand = {}
    where["weblocks"] = origin_of("h")
    for kind, thread in (("weblocks", False), ("weblocks-thread", True),
                         ("flock", False), ("filelock", False),
                         ("portalocker", False)):
        base = kind.split("-")[0]
        turns = fast_turns if base in ("weblocks", "flock") else slow_turns
        hand[kind] = (handoff(base, where[base], turns, thread), turns)
    labels = dict(LABELS, **{
        "weblocks": "weblocks, main thread",
        "weblocks-thread": "weblocks, worker thread"})
    for kind, (r, turns) in hand.items():
        print(f"  {labels[kind]:34} {r:12,.0f} /s  "
              f"{r / hand['filelock'][0]:8.1f}x filelock  ({turns} turns)")
    weblocks.remove_bucket(where["weblocks"])
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
