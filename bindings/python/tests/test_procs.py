# SPDX-License-Identifier: MIT
"""Across processes: FIFO order, shared holders, query, a killed holder,
fork."""
from __future__ import annotations

import os
import threading


from weblocks import InvalidStateError, LockManager

from conftest import pending_names, python_peer, wait_until


def _queue_in_order(locks, procs, name, mode="exclusive"):
    """Have each peer request name, one after the other: each request is
    seen pending before the next is made."""
    for i, p in enumerate(procs):
        p.send(f"acquire {name} {mode}")
        wait_until(lambda: len(locks.query().pending) == i + 1,
                   f"request {i} queued")


def test_fifo_across_processes(origin, peers):
    procs = [peers(python_peer(origin)) for _ in range(4)]
    with LockManager(origin) as locks:
        with locks.request("r"):
            _queue_in_order(locks, procs, "r")
            assert [p.client_id for p in locks.query().pending] == [
                p.client_id for p in procs]
        for i, p in enumerate(procs):
            p.expect("granted")
            # Only the first in the queue is granted.
            held = locks.query().held
            assert [h.client_id for h in held] == [p.client_id]
            p.send("release r")
            p.expect("released")
        assert locks.query().held == []


def test_writers_are_not_starved_by_readers(origin, peers):
    reader1, writer, reader2 = (peers(python_peer(origin)) for _ in range(3))
    with LockManager(origin) as locks:
        reader1.send("acquire r shared")
        reader1.expect("granted")
        _queue_in_order(locks, [writer, reader2], "r",)
        # reader2 asked for shared after writer asked for exclusive: both
        # wait, though only shared locks are held.
        modes = [(p.mode, p.client_id) for p in locks.query().pending]
        assert modes[0] == ("exclusive", writer.client_id)
        reader1.send("release r")
        reader1.expect("released")
        writer.expect("granted")
        assert pending_names(locks) == ["r"]
        writer.send("release r")
        writer.expect("released")
        reader2.expect("granted")


def test_shared_lock_held_by_several_processes(origin, peers):
    procs = [peers(python_peer(origin)) for _ in range(3)]
    for p in procs:
        p.send("acquire s shared")
        p.expect("granted")
    seen = procs[0].query()
    assert sorted(seen["held"]) == sorted(
        ("s", "shared", p.client_id) for p in procs)
    with LockManager(origin) as locks:
        with locks.request("s", if_available=True) as lock:
            assert lock is None
        with locks.request("s", if_available=True, mode="shared") as lock:
            assert lock is not None


def test_killed_holder_waiter_is_granted(origin, peers):
    holder, waiter = peers(python_peer(origin)), peers(python_peer(origin))
    with LockManager(origin) as locks:
        holder.send("acquire r exclusive")
        holder.expect("granted")
        waiter.send("acquire r exclusive")
        wait_until(lambda: pending_names(locks) == ["r"], "waiter queued")
        holder.kill()
        waiter.expect("granted")
        held = locks.query().held
        assert [h.client_id for h in held] == [waiter.client_id]


def test_killed_waiter_leaves_the_queue(origin, peers):
    w1, w2 = peers(python_peer(origin)), peers(python_peer(origin))
    with LockManager(origin) as locks:
        with locks.request("r"):
            _queue_in_order(locks, [w1, w2], "r")
            w1.kill()
        w2.expect("granted")


def test_main_thread_waiter_granted_by_another_process(origin, peers):
    """The main thread's wait (poll on the manager's descriptor) is woken
    by a release in another process, and by a holder's death."""
    holder = peers(python_peer(origin))
    holder.send("acquire r exclusive")
    holder.expect("granted")
    with LockManager(origin) as locks:
        t = threading.Thread(target=lambda: (
            wait_until(lambda: pending_names(locks) == ["r"], "queued"),
            holder.send("release r")))
        t.start()
        with locks.request("r") as lock:
            assert lock is not None
        t.join(10)
        holder.expect("released")
        holder.send("acquire r exclusive")
        holder.expect("granted")
        t = threading.Thread(target=lambda: (
            wait_until(lambda: pending_names(locks) == ["r"], "queued"),
            holder.kill()))
        t.start()
        with locks.request("r") as lock:
            assert lock is not None
        t.join(10)


def test_fork_child_cannot_use_the_parents_manager(origin):
    with LockManager(origin) as locks:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                locks.request("r", lambda l: None)
            except InvalidStateError:
                code = 0
            except BaseException:
                code = 2
            os.write(w, bytes([code]))
            os._exit(0)
        os.close(w)
        result = os.read(r, 1)
        os.close(r)
        os.waitpid(pid, 0)
        assert result == b"\0", "the child did not get InvalidStateError"
        assert locks.request("r", lambda l: "parent ok") == "parent ok"
