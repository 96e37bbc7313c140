# SPDX-License-Identifier: MIT
"""Requests, options, errors and the spec's validation order."""
from __future__ import annotations

import builtins
import errno
import inspect
import threading

import pytest

import weblocks
from weblocks import (AbortController, AbortError, InvalidStateError,
                      LockManager, LockStolenError, NameTooLongError,
                      NotSupportedError, QuotaExceededError, SecurityError,
                      WebLocksError, WebLocksTypeError, WebLocksValueError)

from conftest import pending_names, wait_until


def test_exclusive_lock_attributes_and_release(origin):
    with LockManager(origin) as a, LockManager(origin) as b:
        with a.request("res") as lock:
            assert lock.name == "res" and lock.mode == "exclusive"
            assert not lock.stolen
            first = lock.token
            # Two managers are two clients: b is excluded.
            with b.request("res", if_available=True) as other:
                assert other is None
            held = a.query().held
            assert [(h.name, h.mode, h.client_id) for h in held] == [
                ("res", "exclusive", a.client_id)]
        assert a.query().held == []
        with b.request("res") as lock:
            assert lock.token > first


def test_names_are_bytes_with_a_length(origin):
    with LockManager(origin) as a, LockManager(origin) as b:
        with a.request(b"x\0y"), a.request(b""), a.request(b"\xff"), \
                a.request("é"):
            for free in (b"x", b"x\0z", "x\0z"):
                with b.request(free, if_available=True) as lock:
                    assert lock is not None
            for taken in (b"x\0y", "", b"\xff", "é".encode()):
                with b.request(taken, if_available=True) as lock:
                    assert lock is None
            names = {h.name for h in a.query().held}
            # UTF-8 names come back as str, others as bytes.
            assert names == {"x\0y", "", b"\xff", "é"}


def test_shared_locks_are_held_together_exclusive_waits(origin):
    with LockManager(origin) as a, LockManager(origin) as b, \
            LockManager(origin) as c:
        with a.request("r", mode="shared"), b.request("r", mode="shared"):
            modes = sorted((h.mode, h.client_id) for h in c.query().held)
            assert modes == sorted([("shared", a.client_id),
                                    ("shared", b.client_id)])
            with c.request("r", if_available=True) as lock:
                assert lock is None
        with c.request("r", if_available=True) as lock:
            assert lock is not None and lock.mode == "exclusive"


def test_if_available_miss_is_never_pending(origin):
    seen = []
    with LockManager(origin) as a, LockManager(origin) as b:
        with a.request("r"):
            assert b.request("r", seen.append, if_available=True) is None
            assert seen == [None]
            assert b.query().pending == []


def test_callback_form_returns_the_callback_result(origin):
    with LockManager(origin) as a:
        assert a.request("r", lambda lock: (lock.name, lock.mode)) == (
            "r", "exclusive")
        assert a.request("r", lambda lock: lock.mode, mode="shared") == \
            "shared"
        assert a.query().held == []


def test_context_manager_releases_on_exception(origin):
    with LockManager(origin) as a, LockManager(origin) as b:
        with pytest.raises(KeyError):
            with a.request("r"):
                raise KeyError("inside")
        with pytest.raises(ZeroDivisionError):
            a.request("r", lambda lock: 1 / 0)
        assert a.query().held == []
        with b.request("r", if_available=True) as lock:
            assert lock is not None


def test_steal_takes_the_lock_and_its_holder_sees_abort(origin):
    with LockManager(origin) as a, LockManager(origin) as b:
        with pytest.raises(LockStolenError) as info:
            with a.request("r") as old:
                with b.request("r", steal=True) as new:
                    assert new is not None and new.token > old.token
                    assert old.stolen
                    held = b.query().held
                    assert [h.client_id for h in held] == [b.client_id]
        assert isinstance(info.value, AbortError)
        assert info.value.name == "LockStolenError"
        assert a.query().held == []


def test_steal_goes_ahead_of_the_queue(origin):
    with LockManager(origin) as a, LockManager(origin) as b, \
            LockManager(origin) as c:
        order = []
        with pytest.raises(LockStolenError):
            with a.request("r"):
                t = threading.Thread(
                    target=lambda: b.request("r", lambda l: order.append(
                        "queued")))
                t.start()
                wait_until(lambda: pending_names(a) == ["r"], "b queued")
                with c.request("r", steal=True):
                    order.append("stealer")
                    assert pending_names(a) == ["r"]
        t.join(10)
        assert order == ["stealer", "queued"]


def test_stolen_exit_does_not_hide_the_block_exception(origin):
    with LockManager(origin) as a, LockManager(origin) as b:
        with pytest.raises(KeyError):
            with a.request("r"):
                with b.request("r", steal=True):
                    pass
                raise KeyError("mine")


def test_signal_already_aborted(origin):
    ctl = AbortController()
    ctl.abort()
    assert ctl.signal.aborted
    with LockManager(origin) as a:
        with pytest.raises(AbortError):
            with a.request("r", signal=ctl.signal):
                pytest.fail("granted")
        assert a.query().pending == [] and a.query().held == []


def test_signal_reason_is_raised(origin):
    class Reason(Exception):
        pass

    ctl = AbortController()
    ctl.abort(Reason("why"))
    with LockManager(origin) as a:
        with pytest.raises(Reason):
            a.request("r", lambda l: None, signal=ctl.signal)
        ctl2 = AbortController()
        ctl2.abort("text reason")
        with pytest.raises(AbortError) as info:
            a.request("r", lambda l: None, signal=ctl2.signal)
        assert info.value.reason == "text reason"
        assert ctl2.signal.reason == "text reason"
        with pytest.raises(AbortError):
            ctl2.signal.throw_if_aborted()


def test_signal_not_aborted_is_granted(origin):
    ctl = AbortController()
    with LockManager(origin) as a:
        assert a.request("r", lambda l: l.mode, signal=ctl.signal,
                         mode="shared") == "shared"
    ctl.abort()  # after the grant: ignored


def test_signal_abort_from_another_thread(origin):
    ctl = AbortController()
    with LockManager(origin) as a, LockManager(origin) as b:
        with a.request("r"):
            def abort_when_queued():
                wait_until(lambda: pending_names(a) == ["r"], "queued")
                ctl.abort()

            t = threading.Thread(target=abort_when_queued)
            t.start()
            with pytest.raises(AbortError):
                b.request("r", lambda l: pytest.fail("granted"),
                          signal=ctl.signal)
            t.join(10)
            assert a.query().pending == []


def test_timeout(origin):
    with LockManager(origin) as a, LockManager(origin) as b:
        with a.request("r"):
            with pytest.raises(weblocks.TimeoutError) as info:
                b.request("r", lambda l: None, timeout=0.05)
            assert isinstance(info.value, builtins.TimeoutError)
            assert a.query().pending == []
        assert b.request("r", lambda l: l.mode, timeout=5) == "exclusive"
        assert b.request("r", lambda l: "inf", timeout=float("inf")) == "inf"
        with pytest.raises(NotSupportedError):
            b.request("r", lambda l: None, timeout=float("inf"), steal=True)
        with pytest.raises(WebLocksValueError):
            b.request("r", lambda l: None, timeout=float("nan"))


@pytest.mark.parametrize("kwargs, error", [
    ({"mode": "EXCLUSIVE"}, WebLocksTypeError),
    ({"mode": None}, WebLocksTypeError),
    ({"signal": object()}, WebLocksTypeError),
    ({"timeout": "1"}, WebLocksTypeError),
    ({"timeout": 0}, WebLocksValueError),
    ({"timeout": -1.0}, WebLocksValueError),
])
def test_bad_arguments(origin, kwargs, error):
    with LockManager(origin) as a:
        with pytest.raises(error):
            a.request("r", lambda l: None, **kwargs)
        assert issubclass(error, WebLocksError)
        with pytest.raises(WebLocksTypeError):
            a.request(42, lambda l: None)
        with pytest.raises(TypeError):
            a.request("r", "not callable")


def _aborted():
    ctl = AbortController()
    ctl.abort()
    return ctl.signal


# The spec's request() steps: 3 InvalidStateError (closed), 5 '-' name,
# 6 steal + ifAvailable, 7 steal + shared, 8 signal + steal/ifAvailable
# (NotSupportedError), 9 aborted signal; then the library's name length.
@pytest.mark.parametrize("name, kwargs, error", [
    ("-x", {"steal": True, "if_available": True}, NotSupportedError),
    ("-x", {"signal": "aborted"}, NotSupportedError),
    ("ok", {"steal": True, "if_available": True}, NotSupportedError),
    ("ok", {"steal": True, "mode": "shared"}, NotSupportedError),
    ("ok", {"steal": True, "signal": "aborted"}, NotSupportedError),
    ("ok", {"if_available": True, "signal": "aborted"}, NotSupportedError),
    ("ok", {"steal": True, "timeout": 1}, NotSupportedError),
    ("ok", {"if_available": True, "timeout": 1}, NotSupportedError),
    ("n" * 2000, {"signal": "aborted"}, AbortError),
    ("n" * 2000, {"steal": True, "if_available": True}, NotSupportedError),
    ("-" + "n" * 2000, {}, NotSupportedError),
    ("n" * 2000, {}, NameTooLongError),
])
def test_validation_order(origin, name, kwargs, error):
    if kwargs.get("signal") == "aborted":
        kwargs["signal"] = _aborted()
    with LockManager(origin) as a:
        with pytest.raises(error):
            with a.request(name, **kwargs):
                pytest.fail("granted")
        snap = a.query()
        assert snap.held == [] and snap.pending == []
    # A closed manager comes first (step 3), a bad type before that.
    with pytest.raises(InvalidStateError):
        a.request(name, lambda l: None, **kwargs)
    with pytest.raises(WebLocksTypeError):
        a.request(name, lambda l: None, mode="both", **{
            k: v for k, v in kwargs.items() if k != "mode"})


def test_name_too_long_is_a_value_error(origin):
    with LockManager(origin, max_name_len=8) as a:
        assert a.request("12345678", lambda l: l.name) == "12345678"
        with pytest.raises(ValueError):
            a.request("123456789", lambda l: None)


def test_security_error_for_opaque_origin():
    with pytest.raises(SecurityError):
        LockManager("null")


def test_manager_arguments():
    with pytest.raises(WebLocksTypeError):
        LockManager(b"https://bytes")
    with pytest.raises(WebLocksValueError):
        LockManager("")
    with pytest.raises(WebLocksValueError):
        LockManager("https://x\x01y")
    with pytest.raises(NameTooLongError):
        LockManager("https://" + "o" * 2000)


def test_quota_exceeded(origin):
    with LockManager(origin, max_names=2) as a, LockManager(origin) as b:
        with a.request("x"), a.request("y"):
            with pytest.raises(QuotaExceededError):
                b.request("z", lambda l: None)
            assert [p.name for p in b.query().pending] == []
        assert b.request("z", lambda l: l.name) == "z"


def test_deadlock_detection(origin):
    with LockManager(origin, detect_deadlocks=True) as a, \
            LockManager(origin, detect_deadlocks=True) as b:
        with a.request("x"), b.request("y"):
            result = []
            t = threading.Thread(target=lambda: result.append(
                a.request("y", lambda l: "a got y")))
            t.start()
            wait_until(lambda: pending_names(a) == ["y"], "a waits for y")
            with pytest.raises(weblocks.DeadlockError):
                b.request("x", lambda l: None)
            assert pending_names(a) == ["y"]
        t.join(10)
        assert result == ["a got y"]


def test_query_shows_pending_in_order_with_client_ids(origin):
    with LockManager(origin) as a, LockManager(origin) as b, \
            LockManager(origin) as c:
        with a.request("r"):
            threads = []
            for m, mode in ((b, "shared"), (c, "exclusive")):
                t = threading.Thread(target=m.request,
                                     args=("r", lambda l: None),
                                     kwargs={"mode": mode})
                t.start()
                threads.append(t)
                n = len(threads)
                wait_until(lambda: len(a.query().pending) == n, "queued")
            snap = a.query()
            assert [(p.name, p.mode, p.client_id) for p in snap.pending] == [
                ("r", "shared", b.client_id), ("r", "exclusive", c.client_id)]
            assert snap.held[0].client_id == a.client_id
            assert snap.held[0].pid == __import__("os").getpid()
        for t in threads:
            t.join(10)


def test_close_releases_and_ends_waiters(origin):
    a = LockManager(origin)
    with LockManager(origin) as b:
        errors = []

        def wait():
            try:
                a.request("q", lambda l: None)
            except WebLocksError as e:
                errors.append(e)

        with pytest.raises(InvalidStateError):
            with a.request("r"):
                with b.request("q"):
                    t = threading.Thread(target=wait)
                    t.start()
                    wait_until(lambda: pending_names(b) == ["q"], "queued")
                    a.close()
                    t.join(10)
                    assert [type(e) for e in errors] == [InvalidStateError]
                    # a's lock on "r" was released by close.
                    with b.request("r", if_available=True) as lock:
                        assert lock is not None
        assert a.closed
        for call in (a.query, lambda: a.request("r", print),
                     lambda: a.request("r").__enter__(),
                     lambda: a.client_id):
            with pytest.raises(InvalidStateError):
                call()
        a.close()


def test_plain_request_is_used_once_and_sees_close(origin):
    # request(name) without options is its own short path (one object, the
    # options kept per name): the same contract as any request.
    with LockManager(origin) as a, LockManager(origin) as b:
        req = a.request("p")
        assert isinstance(req, weblocks.LockRequest)
        assert "LockRequest" in repr(req)
        with req as lock:
            assert isinstance(lock, weblocks.Lock)
            assert (lock.name, lock.mode) == ("p", "exclusive")
            assert lock.token > 0 and not lock.stolen
            assert "held" in repr(lock)
            with b.request("p", if_available=True) as other:
                assert other is None
        assert "released" in repr(lock) and not lock.stolen
        with pytest.raises(RuntimeError):
            req.__enter__()
        # Made before the close, entered after it.
        late = a.request("p")
        a.close()
        with pytest.raises(InvalidStateError):
            late.__enter__()
        with pytest.raises(InvalidStateError):
            a.request("p").__enter__()
        with b.request("p", if_available=True) as other:
            assert other is not None


def test_plain_request_waits_on_a_worker_thread(origin):
    # The if_available probe misses; the request then queues and waits.
    with LockManager(origin) as a, LockManager(origin) as b:
        order = []
        # b's out pointer for "w" is kept with the stale pointer of this
        # released lock: the probe that misses must not take it for a grant.
        with b.request("w"):
            pass

        def worker():
            with b.request("w") as lock:
                order.append(("b", lock.name, lock.token))

        with a.request("w") as first:
            t = threading.Thread(target=worker)
            t.start()
            wait_until(lambda: pending_names(a) == ["w"], "b queued")
            order.append(("a", first.name, first.token))
        t.join(10)
        assert [o[0] for o in order] == ["a", "b"]
        assert order[1][2] > order[0][2]


def test_plain_request_keeps_its_manager(origin):
    # The request holds its manager: nothing else refers to it here.
    req = LockManager(origin).request("k")
    with req as lock:
        assert lock.name == "k"
    del req, lock


def test_plain_request_dropped_while_held_is_released(origin):
    # Entered by hand and dropped without its exit: the lock is released
    # (by its block's finalizer), not left held until close.
    with LockManager(origin) as a, LockManager(origin) as b:
        req = a.request("d")
        lock = req.__enter__()
        assert lock is req and lock.token > 0
        with b.request("d", if_available=True) as other:
            assert other is None
        del req, lock
        with b.request("d", if_available=True) as other:
            assert other is not None
        # The pool's blocks hold nothing: the next plain request is granted.
        with a.request("d") as again:
            assert again.token > 0


def test_request_options_are_keyword_only(origin):
    with LockManager(origin) as a:
        with pytest.raises(TypeError):
            a.request("o", None, "shared")
        with pytest.raises(TypeError, match=r"request\(\) got an unexpected"):
            a.request("o", mode="shared", shared=True)
        with pytest.raises(TypeError):
            a.request("o", name="p")
        with a.request(name="o", mode="shared") as lock:
            assert lock.mode == "shared"
        assert a.request(name="o", callback=lambda l: l.name) == "o"
        params = inspect.signature(a.request).parameters
        assert list(params) == ["name", "callback", "mode", "if_available",
                                "steal", "signal", "timeout"]
        assert params["mode"].kind is inspect.Parameter.KEYWORD_ONLY


def test_remove_bucket(origin):
    a = LockManager(origin)
    try:
        with pytest.raises(weblocks.WebLocksOSError) as info:
            weblocks.remove_bucket(origin)
        assert info.value.errno == errno.EBUSY  # still open
    finally:
        a.close()
    assert weblocks.remove_bucket(origin) is True
    assert weblocks.remove_bucket(origin) is False


def test_version():
    assert weblocks.version() >= (0, 3, 0)
