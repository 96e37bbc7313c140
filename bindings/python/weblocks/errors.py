# SPDX-License-Identifier: MIT
"""Exceptions: one class per DOMException name the spec uses.

Every exception this package raises is a :class:`WebLocksError`. Those
standing for bad arguments also derive from the built-in ``TypeError`` or
``ValueError``, and :class:`TimeoutError` from the built-in one, so that
``except ValueError`` works as elsewhere in Python.
"""
from __future__ import annotations

import builtins
import errno as _errno
from typing import Dict, Optional, Type

from . import _lib


class WebLocksError(Exception):
    """Base of every error of this package.

    Attributes:
        code: the library's negative error code (``WLK_E*`` or ``-errno``),
            or None for an error found in Python before calling it.
        name: the DOMException-style name (``wlk_error_name()``).
    """

    code: Optional[int]
    name: str

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code
        self.name = type(self).__name__


class WebLocksTypeError(WebLocksError, builtins.TypeError):
    """An argument of the wrong type (the spec's TypeError)."""


class WebLocksValueError(WebLocksError, builtins.ValueError):
    """An argument out of range (the library's WLK_EINVAL)."""


class NameTooLongError(WebLocksValueError):
    """A lock name longer than the bucket allows (WLK_ENAMETOOLONG), or an
    origin, bucket, partition or client_id longer than its limit."""


class NotSupportedError(WebLocksError):
    """NotSupportedError: a name starting with '-', or an option
    combination the spec refuses (steal with if_available or shared mode, a
    signal or timeout with steal or if_available)."""


class AbortError(WebLocksError):
    """AbortError: the request was aborted before it was granted."""


class LockStolenError(AbortError):
    """AbortError: the lock was stolen by another request (the spec's
    released promise rejecting)."""


class TimeoutError(WebLocksError, builtins.TimeoutError):
    """TimeoutError: the timeout passed before the lock was granted."""


class InvalidStateError(WebLocksError):
    """InvalidStateError: the manager is closed, or was inherited through
    fork()."""


class SecurityError(WebLocksError):
    """SecurityError: the opaque origin "null", or a segment owned by
    another user or with looser permissions than asked."""


class QuotaExceededError(WebLocksError):
    """QuotaExceededError: a table of the bucket (names, requests, clients,
    processes) is full; nothing changed."""


class DeadlockError(WebLocksError):
    """The request would close a cycle of managers waiting for each other
    (only for managers opened with ``detect_deadlocks=True``)."""


class CorruptError(WebLocksError):
    """The bucket's segment failed validation or repair (WLK_ECORRUPT)."""


class FormatError(WebLocksError):
    """The segment was made by an incompatible build (WLK_EFORMAT)."""


class WebLocksOSError(WebLocksError, builtins.OSError):
    """A system error (a negated errno value from the library)."""

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        WebLocksError.__init__(self, message, code)
        self.errno = -code if code is not None else None
        self.strerror = message


_BY_CODE: Dict[int, Type[WebLocksError]] = {
    _lib.EINVAL: WebLocksValueError,
    _lib.EDEADLK: DeadlockError,
    _lib.ENAMETOOLONG: NameTooLongError,
    _lib.ETIMEDOUT: TimeoutError,
    _lib.ENOTSUPPORTED: NotSupportedError,
    _lib.EABORTED: AbortError,
    _lib.ESTOLEN: LockStolenError,
    _lib.ESTATE: InvalidStateError,
    _lib.ESECURITY: SecurityError,
    _lib.EFULL: QuotaExceededError,
    _lib.ECORRUPT: CorruptError,
    _lib.EFORMAT: FormatError,
}


def from_code(code: int, what: str = "") -> WebLocksError:
    """The exception for a negative code returned by the library."""
    lib = _lib.lib()
    msg = lib.wlk_strerror(code).decode()
    if what:
        msg = f"{what}: {msg}"
    cls = _BY_CODE.get(code)
    if cls is None:
        if -code in _errno.errorcode:
            msg += f" ({_errno.errorcode[-code]})"
        cls = WebLocksOSError
    return cls(msg, code)
