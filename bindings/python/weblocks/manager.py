# SPDX-License-Identifier: MIT
"""LockManager, the request object and Lock: navigator.locks in Python."""
from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import select
import threading
from ctypes import byref, c_void_p, string_at
from dataclasses import dataclass
from time import perf_counter as _perf_counter
from typing import (TYPE_CHECKING, Any, Awaitable, Callable, Dict, List,
                    Optional, Tuple, Union)

from . import _lib
from .abort import AbortSignal, as_exception
from .errors import (InvalidStateError, WebLocksError, WebLocksTypeError,
                     WebLocksValueError, from_code)

Name = Union[str, bytes]
_MODES = {"exclusive": _lib.EXCLUSIVE, "shared": _lib.SHARED}
_MODE_NAMES = {v: k for k, v in _MODES.items()}

# How long a blocking request on the main thread sleeps in poll() before it
# looks again whether another thread's dispatch completed it (that thread
# then drained the descriptor). Only that rare case waits for the slice.
_POLL_SLICE_MS = 200
# How long a blocking request on the main thread looks at the manager's
# descriptor without sleeping before it sleeps in poll() (0 on one CPU).
_SPIN_S = float(os.environ.get("WEBLOCKS_SPIN_US", "50")) / 1e6 \
    if (os.cpu_count() or 1) > 1 else 0.0
# How many names' default options a manager keeps ready.
_PLAIN_CACHE = 256


def _decode(raw: bytes) -> Name:
    """A name from the library: str when it is UTF-8, else the bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _encode_name(name: Any) -> bytes:
    if isinstance(name, str):
        try:
            return name.encode("utf-8")
        except UnicodeEncodeError as e:
            raise WebLocksValueError(f"name is not valid UTF-8: {e}") from e
    if isinstance(name, (bytes, bytearray, memoryview)):
        return bytes(name)
    raise WebLocksTypeError(
        f"name must be str or bytes, not {type(name).__name__}")


def _encode_id(what: str, value: Any, none_ok: bool = True) -> Optional[bytes]:
    if value is None and none_ok:
        return None
    if not isinstance(value, str):
        raise WebLocksTypeError(
            f"{what} must be str, not {type(value).__name__}")
    if "\0" in value:
        raise WebLocksValueError(f"{what} contains a NUL character")
    return value.encode("utf-8")


@dataclass(frozen=True)
class LockInfo:
    """LockInfo: one held lock or pending request in a query() snapshot.

    Attributes:
        name: the lock name (str if it is UTF-8, else bytes).
        mode: "exclusive" or "shared".
        client_id: the clientId of the manager that holds or requested it.
        pid: the process id of that manager (an extension).
    """

    name: Name
    mode: str
    client_id: str
    pid: int


@dataclass(frozen=True)
class LockManagerSnapshot:
    """LockManagerSnapshot: the result of :meth:`LockManager.query`.

    Attributes:
        held: one entry per holder (each shared holder has its own).
        pending: the queued requests; those of one name in request order.
    """

    held: List[LockInfo]
    pending: List[LockInfo]


class Lock:
    """A granted lock (the spec's Lock), valid inside its request.

    Attributes:
        name: the name as it was requested.
        mode: "exclusive" or "shared".
    """

    __slots__ = ("name", "mode", "_token", "_ptr")

    def __init__(self, name: Name, mode: str, ptr: int) -> None:
        self._ptr: Optional[int] = ptr
        self.name = name
        self.mode = mode
        self._token = 0

    @property
    def token(self) -> int:
        """The grant's fencing token: larger than every earlier grant's of
        the same name in the bucket (an extension)."""
        token = getattr(self, "_token", 0)
        if not token and self._ptr:
            token = self._token = _lib.lib().wlk_lock_token(self._ptr)
        return token

    @property
    def stolen(self) -> bool:
        """True once another request stole this lock (steal=True): its
        holder should stop using the resource. False after release."""
        ptr = self._ptr
        return bool(ptr) and bool(_lib.lib().wlk_lock_stolen(ptr))

    def _release(self) -> None:
        """Release the lock; raise LockStolenError if it had been stolen."""
        ptr, self._ptr = self._ptr, None
        if ptr:
            rc = _lib.lib().wlk_release(ptr)
            if rc:
                raise from_code(rc, f"release of {self.name!r}")

    def __repr__(self) -> str:
        state = "stolen" if self.stolen else ("held" if self._ptr else
                                              "released")
        return (f"<Lock {self.name!r} {self.mode} token={self.token} "
                f"{state}>")


class _HandleLock(Lock):
    """The Lock of a request with options: a handle of the library's, which
    its finalizer releases. (Lock itself has no finalizer: the plain
    request, a Lock too, keeps its handle in a _Call, which has one.)"""

    __slots__ = ()

    def __del__(self) -> None:
        # A lock dropped without its request's exit (an abandoned
        # generator, say) is released, not leaked.
        if getattr(self, "_ptr", None) and _lib._lib is not None:
            _lib._lib.wlk_release(self._ptr)


class _Pending:
    """An asynchronous request until its callback has run."""

    __slots__ = ("req", "done", "status", "lock", "cancelled", "mutex",
                 "future", "loop", "signal", "on_done")

    def __init__(self) -> None:
        self.req = c_void_p()
        self.done = False
        self.status = 0
        self.lock: Optional[int] = None
        self.cancelled = False
        self.mutex = threading.Lock()
        self.future: Optional[asyncio.Future] = None
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.signal: Optional[AbortSignal] = None
        self.on_done: Optional[Callable[[], None]] = None

    def complete(self, status: int, lock: Optional[int]) -> None:
        with self.mutex:
            self.done, self.status, self.lock = True, status, lock
            cancelled = self.cancelled
        if cancelled and lock:
            # Cancelled by a task that is gone; nobody will release it.
            _lib.lib().wlk_release(lock)
            self.lock = None
        if self.on_done is not None:
            self.on_done()
        fut, loop = self.future, self.loop
        if fut is not None and loop is not None and not cancelled:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                _settle(fut)
            else:
                loop.call_soon_threadsafe(_settle, fut)

    def cancel(self) -> bool:
        """Cancel unless already completed; True if it was cancelled."""
        with self.mutex:
            if self.done:
                return False
            self.cancelled = True
            _lib.lib().wlk_async_cancel(self.req)
            return True


def _settle(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


# One C callback for every asynchronous request; its argument is a key of
# _pending. Kept alive for the life of the module.
_pending: Dict[int, _Pending] = {}
_keys = itertools.count(1)


@_lib.GRANTED_CB
def _on_granted(req: int, status: int, lock: Optional[int],
                arg: Optional[int]) -> None:
    p = _pending.pop(arg or 0, None)
    if p is None:
        if lock:
            _lib.lib().wlk_release(lock)
        return
    p.complete(status, lock)


class _Options:
    """The checked options of one request."""

    __slots__ = ("name", "raw", "raw_len", "mode", "mode_name",
                 "if_available", "steal", "signal", "timeout", "c", "probe",
                 "m", "calls")

    def __init__(self, name: Any, mode: Any, if_available: Any, steal: Any,
                 signal: Any, timeout: Any) -> None:
        # The conversions WebIDL does before the algorithm runs: a wrong
        # type is a TypeError, before any of the spec's checks.
        self.raw = _encode_name(name)
        self.raw_len = len(self.raw)
        self.name = name if isinstance(name, str) else self.raw
        if not isinstance(mode, str) or mode not in _MODES:
            raise WebLocksTypeError(
                f"mode must be 'exclusive' or 'shared', not {mode!r}")
        if signal is not None and not isinstance(signal, AbortSignal):
            raise WebLocksTypeError(
                "signal must be an AbortSignal (AbortController().signal)")
        timeout_ns = 0
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout,
                                                           (int, float)):
                raise WebLocksTypeError(
                    f"timeout must be a number of seconds, not "
                    f"{type(timeout).__name__}")
            if not timeout > 0:
                raise WebLocksValueError(
                    f"timeout must be more than 0 seconds, not {timeout!r}")
            # Beyond the 64-bit clock (inf included) waits without limit,
            # and still counts as a timeout for the spec's checks.
            timeout_ns = (2**64 - 1 if timeout >= 2**64 / 1e9
                          else max(1, int(timeout * 1e9)))
        self.mode = _MODES[mode]
        self.mode_name = mode
        self.if_available = bool(if_available)
        self.steal = bool(steal)
        self.signal = signal
        self.timeout = timeout
        if (self.mode or self.if_available or self.steal or signal is not None
                or timeout_ns):
            self.c: Optional[_lib.Options] = _lib.Options(
                _OPTIONS_SIZE, self.mode, self.if_available, self.steal,
                signal._ptr if signal is not None else None, timeout_ns)
        else:
            self.c = None
        # A request that could wait asks if_available first, on the main
        # thread (LockManager._acquire); a signal matters only to a wait.
        self.probe = (_PROBES[self.mode] if not (
            self.if_available or self.steal or signal is not None) else None)


_OPTIONS_SIZE = _lib.ctypes.sizeof(_lib.Options)
# Read-only options of the if_available probes, one per mode.
_PROBES = {mode: _lib.Options(_OPTIONS_SIZE, mode, True, False, None, 0)
           for mode in _MODE_NAMES}
# The address of the exclusive probe's options (module-lifetime).
_PROBE_EXCLUSIVE = _lib.ctypes.addressof(_PROBES[_lib.EXCLUSIVE])
_MAIN_THREAD = threading.main_thread().ident
_get_ident = threading.get_ident
# The two calls of the uncontended path, wlk_call_acquire() and
# wlk_call_release() without argument conversion (_lib.unchecked), bound
# when the first manager opens (the library is loaded by then).
_call_acquire: Any = None
_call_release: Any = None


class LockRequest:
    """A request made with ``locks.request(name, ...)`` and no callback.

    Use it once, as a context manager: ``with`` blocks the calling thread
    until the lock is granted; ``async with`` waits without blocking the
    event loop. Either gives the :class:`Lock`, or None when an
    ``if_available`` request could not be granted at once; the lock is
    released when the block exits, also by an exception.
    """

    # Two implementations: _PlainRequest for a str name without options
    # (the common case, kept short), _Request for everything else.
    __slots__ = ()


class _Request(LockRequest):
    """A request with options, or a name that is not a str."""

    __slots__ = ("_manager", "_opts", "_lock", "_used")

    def __init__(self, manager: "LockManager", opts: _Options) -> None:
        self._manager = manager
        self._opts = opts
        self._lock: Optional[Lock] = None
        self._used = False

    def _start(self) -> None:
        if self._used:
            raise RuntimeError("a LockRequest can be entered only once")
        self._used = True

    def __enter__(self) -> Optional[Lock]:
        self._start()
        lock = self._lock = self._manager._acquire(self._opts)
        return lock

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._finish(exc is not None)

    async def __aenter__(self) -> Optional[Lock]:
        self._start()
        self._lock = await self._manager._acquire_async(self._opts)
        return self._lock

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._finish(exc is not None)

    def _finish(self, failing: bool) -> None:
        lock, self._lock = self._lock, None
        if lock is None:
            return
        try:
            lock._release()
        except WebLocksError:
            # The block's own exception wins over "stolen" or "closed".
            if not failing:
                raise


class _Call:
    """One struct wlk_call of a plain request's name (the manager, the
    name, the exclusive if_available probe's options) and its byref, the
    one argument of both C calls. Kept in the name's pool (its options'
    ``calls``) between requests; a request takes one for as long as it
    holds the lock, so threads never share one.

    A request entered and dropped without its exit drops its _Call with
    the lock in it: the finalizer releases it, so that it is not leaked
    (a _Call in a pool holds no lock)."""

    __slots__ = ("c", "ref", "held")

    def __init__(self, o: _Options) -> None:
        c = self.c = _lib.Call(o.m, o.raw, o.raw_len, _PROBE_EXCLUSIVE, None)
        self.ref = byref(c)
        # The block's lock field seen as a c_void_p: false when NULL, which
        # costs less to ask than reading the field (c.lock, a new int).
        self.held = c_void_p.from_buffer(c, _lib.Call.lock.offset)

    def __del__(self) -> None:
        release = _call_release
        if release is not None and self.held:
            release(self.ref)


class _PlainRequest(Lock, LockRequest):
    """``locks.request(name)``: a str name, no callback, no options.

    The request is also the Lock it gives, so that the uncontended
    with-block makes one object (without Lock's __init__:
    LockManager.request sets its slots) and two C calls of one argument
    each on a kept block (_Call): an if_available probe (the spec's checks
    answer it as they would the request) and the release. A probe that
    misses goes on to wait as any request does.

    ``_call`` is False until entered, then the _Call holding the lock,
    None once released or if the request failed. Lock's ``name`` and
    ``mode`` come from the options, kept per name by the manager; its
    ``_ptr`` is unused.
    """

    __slots__ = ("_manager", "_opts", "_call")
    # Made by LockManager.request() as _PlainRequest(), which then sets the
    # slots: object's __init__, not Lock's (the cheapest construction).
    __init__ = object.__init__  # type: ignore[assignment]

    name = property(lambda self: self._opts.name,  # type: ignore[assignment]
                    doc="the name as it was requested.")
    mode = property(lambda self: "exclusive",  # type: ignore[assignment]
                    doc='"exclusive".')

    def __enter__(self) -> Lock:
        if self._call is not False:
            raise RuntimeError("a LockRequest can be entered only once")
        o = self._opts
        if o.m is None:
            self._call = None
            raise _closed()
        try:
            call = o.calls.pop()
        except IndexError:
            call = _Call(o)
        # Set before the call: entered (not False) from here on.
        self._call = call
        rc = _call_acquire(call.ref)
        if rc:
            self._call = None
            o.calls.append(call)
            raise self._manager._error(rc, o)
        if not call.held:  # the probe missed: wait as any request
            self._call = None
            o.calls.append(call)
            self._hold(self._manager._wait(o))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        call = self._call
        if call:
            self._call = None
            rc = _call_release(call.ref)
            self._opts.calls.append(call)
            # The block's own exception wins over "stolen" or "closed".
            if rc and exc is None:
                raise from_code(rc, f"release of {self._opts.name!r}")

    async def __aenter__(self) -> Lock:
        if self._call is not False:
            raise RuntimeError("a LockRequest can be entered only once")
        self._call = None
        self._hold(await self._manager._acquire_async(self._opts))
        return self

    def _hold(self, lock: Optional[Lock]) -> None:
        """Hold the lock the request waited for, in a block of the pool."""
        o = self._opts
        try:
            call = o.calls.pop()
        except IndexError:
            call = _Call(o)
        call.c.lock = _adopt(lock)
        self._call = call

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.__exit__(exc_type, exc, tb)

    @property
    def token(self) -> int:
        """The grant's fencing token: larger than every earlier grant's of
        the same name in the bucket (an extension)."""
        token = getattr(self, "_token", 0)
        call = self._call
        if not token and call and call.held:
            token = self._token = _lib.lib().wlk_lock_token(call.c.lock)
        return token

    @property
    def stolen(self) -> bool:
        """True once another request stole this lock (steal=True): its
        holder should stop using the resource. False after release."""
        call = self._call
        return (bool(call) and bool(call.held) and
                bool(_lib.lib().wlk_lock_stolen(call.c.lock)))

    def __repr__(self) -> str:
        call = self._call
        if call is False:
            return f"<LockRequest {self._opts.name!r} exclusive>"
        state = ("stolen" if self.stolen else
                 "held" if call and call.held else "released")
        return (f"<Lock {self.name!r} {self.mode} token={self.token} "
                f"{state}>")


def _adopt(lock: Optional[Lock]) -> Optional[int]:
    """Take over the pointer of a Lock a plain request waited for (never
    None: a plain request is not if_available)."""
    assert lock is not None
    ptr, lock._ptr = lock._ptr, None
    return ptr


def _closed() -> InvalidStateError:
    return InvalidStateError("the lock manager is closed", _lib.ESTATE)


class LockManager:
    """navigator.locks of one context: a clientId in an origin bucket.

    All managers of the same (origin, bucket, partition), in any process of
    this user, share one lock state. Two managers are two clients, also in
    one process, and exclude each other.

    Args:
        origin: the origin, such as "https://example.com" ("null", an
            opaque origin, raises SecurityError).
        bucket: the storage bucket.
        partition: the storage partition.
        client_id: the clientId query() shows; generated when None.
        detect_deadlocks: refuse a request that would close a cycle of
            managers waiting for each other with DeadlockError (an
            extension; off by default as in the spec).
        max_names, max_requests, max_name_len: the capacities of the
            bucket's tables (0: the library's defaults, 1024 names, 4096
            requests, names of 1024 bytes); used only by the process that
            creates the bucket's segment.

    A manager is a context manager: leaving the block closes it. Closing
    releases its locks and drops its queued requests; it is also what
    happens when the process dies.
    """

    def __init__(self, origin: str, bucket: str = "default",
                 partition: str = "", *, client_id: Optional[str] = None,
                 detect_deadlocks: bool = False, max_names: int = 0,
                 max_requests: int = 0, max_name_len: int = 0) -> None:
        self._m: Optional[int] = None
        self._fd = -1
        self._loops: Dict[asyncio.AbstractEventLoop, int] = {}
        self._loops_mutex = threading.Lock()
        # request(name)'s options per name: _plain_options().
        self._plain: Dict[str, _Options] = {}
        o = _manager_options(bucket, partition)
        o.client_id = _encode_id("client_id", client_id)
        o.detect_deadlocks = bool(detect_deadlocks)
        for field, value in (("max_names", max_names),
                             ("max_requests", max_requests),
                             ("max_name_len", max_name_len)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise WebLocksTypeError(f"{field} must be an int")
            if not 0 <= value < 2**32:
                raise WebLocksValueError(f"{field} out of range: {value}")
            setattr(o, field, value)
        out = c_void_p()
        lib = _lib.lib()
        global _call_acquire, _call_release
        if _call_release is None:
            _call_acquire = _lib.unchecked("wlk_call_acquire")
            _call_release = _lib.unchecked("wlk_call_release")
        rc = lib.wlk_manager_open(_encode_id("origin", origin, False),
                                  byref(o), byref(out))
        if rc:
            raise from_code(rc, f"LockManager({origin!r})")
        self._m = out.value
        self.origin = origin
        self.bucket = bucket
        self.partition = partition

    # -- the API -----------------------------------------------------------

    if TYPE_CHECKING:
        # The signature (also request.__signature__, below the class); at
        # run time the options come as **options (see the request below),
        # so that the common call fills in no keyword-only defaults.
        def request(self, name: Name,
                    callback: Optional[Callable[[Optional[Lock]], Any]]
                    = None, *, mode: str = "exclusive",
                    if_available: bool = False, steal: bool = False,
                    signal: Optional[AbortSignal] = None,
                    timeout: Optional[float] = None) -> Any: ...
    else:
        def request(self, name, callback=None, **options):
            """Request a lock (LockManager.request()).

            Args:
                name: the resource name, str (UTF-8) or bytes; not starting
                    with '-'.
                callback: if given, called with the lock held (or with None
                    for an if_available miss) and its result returned; the
                    lock is released when it returns or raises. A coroutine
                    function makes this return an awaitable doing the same
                    without blocking the event loop.
                mode: "exclusive" or "shared".
                if_available: grant only if the lock can be granted at once;
                    otherwise the lock is None.
                steal: release every held lock on the name (their holders'
                    exits raise LockStolenError) and take it at once.
                signal: an AbortSignal; aborting it before the grant raises
                    its reason (AbortError by default).
                timeout: seconds to wait for the grant before TimeoutError
                    (an extension); None waits without limit.

            Returns:
                Without a callback, a :class:`LockRequest` for ``with`` or
                ``async with``; with one, the callback's result (or an
                awaitable of it).

            Raises:
                WebLocksTypeError, WebLocksValueError: bad arguments.
                InvalidStateError: the manager is closed.
                NotSupportedError: a name starting with '-', or steal with
                    if_available or shared mode, or a signal or timeout with
                    steal or if_available.
                AbortError: the signal was aborted (or its reason, if given).
                NameTooLongError: the name is longer than the bucket allows.
                TimeoutError, QuotaExceededError, DeadlockError: see the names.
                LockStolenError: when the lock is released, if it was stolen.

            The checks happen in the spec's order, before anything is queued.
            A blocking request made on the main thread waits in poll() on the
            manager's descriptor, so Python signal handlers run meanwhile (one
            may abort the request's signal, and Ctrl-C's KeyboardInterrupt
            withdraws the request); on other threads it waits in the library
            with the GIL released.
            """
            if callback is None and not options and type(name) is str:
                # The common case: no object but the request, whose options
                # (checked, with the C call's block) are kept per name. The
                # options are **options, not keyword-only parameters, so that
                # this call fills in no defaults.
                try:
                    o = self._plain[name]
                except KeyError:
                    o = self._plain_options(name)
                req = _PlainRequest()
                req._manager = self
                req._opts = o
                req._call = False
                return req
            return self._request(name, callback, **options)

    def _request(self, name: Name,
                 callback: Optional[Callable[[Optional[Lock]], Any]] = None,
                 *, mode: str = "exclusive", if_available: bool = False,
                 steal: bool = False, signal: Optional[AbortSignal] = None,
                 timeout: Optional[float] = None) -> Any:
        """request() with options, a callback or a name not a str."""
        if callback is not None and not callable(callback):
            raise WebLocksTypeError("callback must be callable")
        req = _Request(self, _Options(name, mode, if_available, steal,
                                      signal, timeout))
        if callback is None:
            return req
        if inspect.iscoroutinefunction(callback):
            return _run_async(req, callback)
        with req as lock:
            return callback(lock)

    # Python's message for a keyword it does not know names this function.
    _request.__qualname__ = "LockManager.request"

    def query(self) -> LockManagerSnapshot:
        """The held locks and pending requests of the whole bucket
        (LockManager.query()), at one instant."""
        lib = _lib.lib()
        snap = c_void_p()
        rc = lib.wlk_query(self._handle(), byref(snap))
        if rc:
            raise from_code(rc, "query")
        try:
            held = [_info(lib.wlk_snapshot_held(snap, i).contents)
                    for i in range(lib.wlk_snapshot_held_count(snap))]
            pending = [_info(lib.wlk_snapshot_pending(snap, i).contents)
                       for i in range(lib.wlk_snapshot_pending_count(snap))]
        finally:
            lib.wlk_snapshot_free(snap)
        return LockManagerSnapshot(held, pending)

    @property
    def client_id(self) -> str:
        """This manager's clientId."""
        return _lib.lib().wlk_manager_client_id(self._handle()).decode()

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._m is None

    def close(self) -> None:
        """Close the manager: drop its queued requests, release its locks.

        Requests of other threads waiting on it raise InvalidStateError;
        its locks still inside a ``with`` raise InvalidStateError at exit.
        Closing twice is harmless.
        """
        m, self._m = self._m, None
        if m:
            # Plain requests made before (not entered yet) see it closed.
            for o in self._plain.values():
                o.m = None
            self._plain.clear()
            for loop in list(self._loops):
                _remove_reader(loop, self._fd)
            self._loops.clear()
            _lib.lib().wlk_manager_close(m)

    def __enter__(self) -> "LockManager":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_m", None) and _lib._lib is not None:
            self.close()

    def __repr__(self) -> str:
        return (f"<LockManager {self.origin!r} bucket={self.bucket!r}"
                f"{' closed' if self.closed else ''}>")

    # -- internals ---------------------------------------------------------

    def _handle(self) -> int:
        m = self._m
        if not m:
            raise _closed()
        return m

    def _plain_options(self, name: str) -> _Options:
        """The options of ``request(name)`` without options, checked once
        and kept, with the pool of the C calls' blocks (_Call)."""
        o = _Options(name, "exclusive", False, False, None, None)
        o.calls = []
        o.m = self._m
        if o.m is not None:
            if len(self._plain) >= _PLAIN_CACHE:
                self._plain.clear()
            self._plain[name] = o
        return o

    def _wait(self, o: _Options) -> Optional[Lock]:
        """A request whose if_available probe missed: wait for the grant
        (interruptibly on the main thread, in the library elsewhere)."""
        if _get_ident() == _MAIN_THREAD:
            return self._wait_interruptibly(o)
        return self._acquire(o)

    def _acquire(self, o: _Options) -> Optional[Lock]:
        """The blocking request: the lock, or None (if_available miss)."""
        m = self._handle()
        out = c_void_p()
        lib = _lib._lib or _lib.lib()
        if _get_ident() != _MAIN_THREAD or o.if_available or o.steal:
            # Waits in the library, the GIL released (steal never waits).
            rc = lib.wlk_acquire(m, o.raw, len(o.raw), o.c, out)
        elif o.probe is not None:
            # A grant at once needs no wait: ask if_available first (the
            # spec's checks give the same answers to both).
            rc = lib.wlk_acquire(m, o.raw, len(o.raw), o.probe, out)
            if not rc and not out.value:
                return self._wait_interruptibly(o)
        else:
            return self._wait_interruptibly(o)
        if rc:
            raise self._error(rc, o)
        return (_HandleLock(o.name, o.mode_name, out.value) if out.value
                else None)

    def _error(self, rc: int, o: _Options) -> BaseException:
        if rc == _lib.EABORTED and o.signal is not None and o.signal.aborted:
            return as_exception(o.signal.reason)
        return from_code(rc, f"request of {o.name!r}")

    def _descriptor(self) -> int:
        """wlk_manager_fd(), asked once."""
        fd = self._fd
        if fd < 0:
            fd = _lib.lib().wlk_manager_fd(self._handle())
            if fd < 0:
                raise from_code(fd, "manager descriptor")
            self._fd = fd
        return fd

    def _submit(self, o: _Options, p: _Pending) -> None:
        """wlk_request_async(): p completes from a later dispatch."""
        lib = _lib.lib()
        m = self._handle()
        key = next(_keys)
        p.signal = o.signal  # kept alive while the request uses it
        _pending[key] = p
        rc = lib.wlk_request_async(m, o.raw, len(o.raw), o.c, _on_granted,
                                   key, byref(p.req))
        if rc:
            del _pending[key]
            raise self._error(rc, o)

    def _result(self, p: _Pending, o: _Options) -> Optional[Lock]:
        if p.status:
            raise self._error(p.status, o)
        return _HandleLock(o.name, o.mode_name, p.lock) if p.lock else None

    def _dispatch(self) -> None:
        m = self._m
        if m:
            _lib.lib().wlk_manager_dispatch(m)

    def _wait_interruptibly(self, o: _Options) -> Optional[Lock]:
        """A blocking request that lets signal handlers run meanwhile."""
        p = _Pending()
        fd = self._descriptor()
        self._submit(o, p)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        try:
            # A holder that lets go soon hands over without this thread
            # going to sleep: look at the descriptor without blocking for
            # a few microseconds first (as the library's blocking calls
            # spin), when another CPU can run that holder meanwhile.
            if _SPIN_S:
                end = _perf_counter() + _SPIN_S
                while not p.done and _perf_counter() < end:
                    if poller.poll(0):
                        self._dispatch()
            while not p.done:
                # poll() runs Python signal handlers when interrupted
                # (PEP 475); one that raises ends up below.
                poller.poll(_POLL_SLICE_MS)
                self._dispatch()
        except BaseException:
            if p.cancel():
                while not p.done and self._m:
                    poller.poll(_POLL_SLICE_MS)
                    self._dispatch()
            if p.lock:
                _lib.lib().wlk_release(p.lock)
            raise
        return self._result(p, o)

    async def _acquire_async(self, o: _Options) -> Optional[Lock]:
        loop = asyncio.get_running_loop()
        if o.probe is not None:
            # Granted at once: no need to go through the descriptor (an
            # if_available request never waits for another holder).
            m = self._handle()
            out = c_void_p()
            rc = _lib.lib().wlk_acquire(m, o.raw, len(o.raw), o.probe, out)
            if rc:
                raise self._error(rc, o)
            if out.value:
                return _HandleLock(o.name, o.mode_name, out.value)
        p = _Pending()
        p.loop = loop
        p.future = loop.create_future()
        fd = self._descriptor()
        self._watch(loop, fd)
        p.on_done = lambda: loop.call_soon_threadsafe(self._unwatch, loop)
        try:
            self._submit(o, p)
        except BaseException:
            self._unwatch(loop)
            raise
        try:
            await p.future
        except BaseException:
            # Task cancellation (or anything else) withdraws the request;
            # a lock granted before it was seen is released.
            if not p.cancel() and p.lock:
                lock, p.lock = p.lock, None
                _lib.lib().wlk_release(lock)
            raise
        return self._result(p, o)

    def _watch(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        with self._loops_mutex:
            n = self._loops.get(loop, 0)
            self._loops[loop] = n + 1
        if n == 0:
            loop.add_reader(fd, self._dispatch)

    def _unwatch(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._loops_mutex:
            n = self._loops.get(loop, 0) - 1
            if n > 0:
                self._loops[loop] = n
                return
            self._loops.pop(loop, None)
        if self._fd >= 0 and self._m:
            _remove_reader(loop, self._fd)


# What help() and inspect show for request(): its keyword-only options.
LockManager.request.__signature__ = inspect.signature(  # type: ignore
    LockManager._request)


def _remove_reader(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    if not loop.is_closed():
        loop.remove_reader(fd)


async def _run_async(req: LockRequest,
                     callback: Callable[[Optional[Lock]], Awaitable[Any]]
                     ) -> Any:
    async with req as lock:
        return await callback(lock)


def _info(c: _lib.LockInfoC) -> LockInfo:
    raw = string_at(c.name, c.name_len) if c.name_len else b""
    return LockInfo(_decode(raw), _MODE_NAMES.get(c.mode, str(c.mode)),
                    (c.client_id or b"").decode("utf-8", "replace"), c.pid)


def _manager_options(bucket: Any, partition: Any) -> _lib.ManagerOptions:
    o = _lib.ManagerOptions()
    o.size = _lib.ctypes.sizeof(o)
    o.bucket = _encode_id("bucket", bucket, False)
    o.partition = _encode_id("partition", partition, False)
    return o


def remove_bucket(origin: str, bucket: str = "default",
                  partition: str = "") -> bool:
    """Delete a bucket's shared-memory segment (wlk_bucket_remove()).

    Returns:
        True if it was removed, False if there was none.

    Raises:
        WebLocksOSError: EBUSY if a process still has it open.
    """
    o = _manager_options(bucket, partition)
    rc = _lib.lib().wlk_bucket_remove(_encode_id("origin", origin, False),
                                      byref(o))
    if rc == -2:  # -ENOENT
        return False
    if rc:
        raise from_code(rc, f"remove_bucket({origin!r})")
    return True


def version() -> Tuple[int, int, int]:
    """The loaded library's version (major, minor, patch)."""
    v = _lib.lib().wlk_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


__all__ = ["LockManager", "LockRequest", "Lock", "LockInfo",
           "LockManagerSnapshot", "remove_bucket", "version"]
