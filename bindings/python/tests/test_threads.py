# SPDX-License-Identifier: MIT
"""Threads: the GIL is released while a request waits; the main thread's
wait lets signal handlers run (abort from a handler, Ctrl-C)."""
from __future__ import annotations

import os
import signal
import threading

import pytest

from weblocks import AbortController, AbortError, LockManager

from conftest import WAIT, pending_names, wait_until


def _count_while(flag: threading.Event, done: threading.Event,
                 out: list) -> None:
    """Pure Python work: it can only run while this thread has the GIL."""
    n = 0
    while not flag.is_set() and n < 200_000:
        n += 1
    out.append(n)
    done.set()


def test_waiting_thread_releases_the_gil(origin):
    with LockManager(origin) as a, LockManager(origin) as b:
        granted = threading.Event()
        with a.request("r"):
            # A worker thread waits in the library (wlk_acquire)...
            t = threading.Thread(target=b.request,
                                 args=("r", lambda l: granted.set()))
            t.start()
            wait_until(lambda: pending_names(a) == ["r"], "worker queued")
            # ...while two more threads run Python code to the end.
            done, out = threading.Event(), []
            counter = threading.Thread(target=_count_while,
                                       args=(granted, done, out))
            counter.start()
            assert done.wait(WAIT), "no other thread ran during the wait"
            assert out == [200_000] and not granted.is_set()
        t.join(WAIT)
        assert granted.is_set()


def test_other_threads_run_while_the_main_thread_waits(origin):
    assert threading.current_thread() is threading.main_thread()
    with LockManager(origin) as a, LockManager(origin) as b:
        lock_a = a.request("r")
        lock_a.__enter__()
        out, done = [], threading.Event()

        def worker():
            # Runs Python code while the main thread waits for "r".
            wait_until(lambda: pending_names(a) == ["r"], "main queued")
            _count_while(threading.Event(), threading.Event(), out)
            lock_a.__exit__(None, None, None)

        t = threading.Thread(target=worker)
        t.start()
        with b.request("r") as lock:
            assert lock is not None
            assert out == [200_000]
        t.join(WAIT)
        done.set()


def test_many_threads_one_manager_exclude_each_other(origin):
    inside, overlaps, rounds = [0], [0], 200
    guard = threading.Lock()

    def work(locks):
        for _ in range(rounds):
            with locks.request("r"):
                with guard:
                    inside[0] += 1
                    overlaps[0] += inside[0] > 1
                with guard:
                    inside[0] -= 1

    with LockManager(origin) as a, LockManager(origin) as b:
        threads = [threading.Thread(target=work, args=(m,))
                   for m in (a, a, b, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
    assert overlaps == [0]




def test_abort_from_a_signal_handler_while_the_main_thread_waits(origin):
    ctl = AbortController()
    old = signal.signal(signal.SIGUSR1, lambda *_: ctl.abort("by handler"))
    try:
        with LockManager(origin) as a, LockManager(origin) as b:
            with a.request("r"):
                def kick():
                    wait_until(lambda: pending_names(a) == ["r"], "queued")
                    os.kill(os.getpid(), signal.SIGUSR1)

                t = threading.Thread(target=kick)
                t.start()
                with pytest.raises(AbortError) as info:
                    b.request("r", lambda l: pytest.fail("granted"),
                              signal=ctl.signal)
                t.join(WAIT)
                assert info.value.reason == "by handler"
                assert a.query().pending == []
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_keyboard_interrupt_withdraws_the_request(origin):
    with LockManager(origin) as a, LockManager(origin) as b:
        with a.request("r"):
            def interrupt():
                wait_until(lambda: pending_names(a) == ["r"], "queued")
                os.kill(os.getpid(), signal.SIGINT)

            t = threading.Thread(target=interrupt)
            t.start()
            with pytest.raises(KeyboardInterrupt):
                b.request("r", lambda l: pytest.fail("granted"))
            t.join(WAIT)
            snap = a.query()
            assert snap.pending == [] and len(snap.held) == 1
        # b holds nothing: the name is free.
        with a.request("r", if_available=True) as lock:
            assert lock is not None


def test_worker_thread_request_aborted_by_the_main_thread(origin):
    ctl = AbortController()
    with LockManager(origin) as a, LockManager(origin) as b:
        with a.request("r"):
            errors = []

            def wait():
                try:
                    b.request("r", lambda l: None, signal=ctl.signal,
                              timeout=WAIT)
                except AbortError as e:
                    errors.append(e)

            t = threading.Thread(target=wait)
            t.start()
            wait_until(lambda: pending_names(a) == ["r"], "worker queued")
            ctl.abort()
            t.join(WAIT)
            assert not t.is_alive() and len(errors) == 1
            assert a.query().pending == []


def test_tokens_grow_across_threads_and_managers(origin):
    tokens = []
    with LockManager(origin) as a, LockManager(origin) as b:
        def work(m):
            for _ in range(50):
                m.request("r", lambda l: tokens.append(l.token))

        threads = [threading.Thread(target=work, args=(m,)) for m in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    # The callbacks run one at a time, in grant order.
    assert len(tokens) == 100 and tokens == sorted(set(tokens))
