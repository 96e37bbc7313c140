# SPDX-License-Identifier: MIT
"""AbortController and AbortSignal, as in the DOM.

A controller owns a library signal (``struct wlk_signal``). ``abort()`` may
be called from any thread, and from a Python signal handler: a request
waiting in another thread leaves its queue and raises the abort reason. A
blocking request made on the main thread waits in a way that lets Python
signal handlers run (see :meth:`weblocks.LockManager.request`), so a
handler may abort it too.
"""
from __future__ import annotations

import threading
from ctypes import c_void_p
from typing import Any, Optional

from . import _lib
from .errors import AbortError, from_code

_abort_lock = threading.RLock()


class AbortSignal:
    """The signal side: passed to requests as ``signal=``."""

    __slots__ = ("_ptr", "_reason", "_aborted", "__weakref__")

    def __init__(self) -> None:
        out = c_void_p()
        rc = _lib.lib().wlk_signal_new(out)
        if rc:
            raise from_code(rc, "AbortSignal")
        self._ptr: Optional[int] = out.value
        self._reason: Any = None
        self._aborted = False

    @property
    def aborted(self) -> bool:
        """True once the controller's abort() was called."""
        return self._aborted

    @property
    def reason(self) -> Any:
        """The abort reason: what abort() was given, or an AbortError."""
        return self._reason

    def throw_if_aborted(self) -> None:
        """Raise the reason if aborted (AbortSignal.throwIfAborted())."""
        if self._aborted:
            raise as_exception(self._reason)

    def _abort(self, reason: Any) -> None:
        # Re-entrant: a signal handler may interrupt abort() on this thread.
        with _abort_lock:
            if self._aborted:
                return
            self._set(reason)
        _lib.lib().wlk_signal_abort(self._ptr, 0)

    def _set(self, reason: Any) -> None:
        # The reason is set before the library wakes the waiters, which
        # read it when their request returns WLK_EABORTED.
        self._reason = (AbortError("signal is aborted without reason",
                                   _lib.EABORTED)
                        if reason is None else reason)
        self._aborted = True

    def __del__(self) -> None:
        # Requests keep a reference to the signal while they use it.
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr and _lib._lib is not None:
            _lib._lib.wlk_signal_free(ptr)


class AbortController:
    """AbortController: ``controller.signal`` goes to requests,
    ``controller.abort()`` aborts those still waiting.

    Example::

        ctl = AbortController()
        threading.Timer(1.0, ctl.abort).start()
        with locks.request("res", signal=ctl.signal) as lock:
            ...
    """

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        """Abort the signal. The first call sets the reason (an
        AbortError when None); later calls do nothing. Safe from any thread
        and from a Python signal handler."""
        self.signal._abort(reason)


def as_exception(reason: Any) -> BaseException:
    """The exception a request aborted with ``reason`` raises."""
    if isinstance(reason, BaseException):
        return reason
    err = AbortError(f"aborted: {reason!r}", _lib.EABORTED)
    err.reason = reason  # type: ignore[attr-defined]
    return err

