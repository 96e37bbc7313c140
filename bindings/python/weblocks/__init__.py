# SPDX-License-Identifier: MIT
"""weblocks - the W3C Web Locks API (navigator.locks) for Linux processes.

Python bindings of libweblocks, through ctypes::

    from weblocks import LockManager

    with LockManager("https://example.com") as locks:
        with locks.request("my_resource") as lock:
            ...                      # held until the block exits

        async def job():
            async with locks.request("my_resource", mode="shared") as lock:
                ...

All managers of one (origin, bucket, partition) of this user, in any
process, share one lock state. A process that dies has its locks released.
"""
from ._lib import load_library
from .abort import AbortController, AbortSignal
from .errors import (AbortError, CorruptError, DeadlockError, FormatError,
                     InvalidStateError, LockStolenError, NameTooLongError,
                     NotSupportedError, QuotaExceededError, SecurityError,
                     TimeoutError, WebLocksError, WebLocksOSError,
                     WebLocksTypeError, WebLocksValueError)
from .manager import (Lock, LockInfo, LockManager, LockManagerSnapshot,
                      LockRequest, remove_bucket, version)

__version__ = "0.4.0"

# TimeoutError is left out of __all__: a star import would shadow the
# built-in one (weblocks.TimeoutError derives from it).
__all__ = [
    "LockManager", "LockRequest", "Lock", "LockInfo", "LockManagerSnapshot",
    "AbortController", "AbortSignal", "remove_bucket", "version",
    "load_library", "WebLocksError", "WebLocksTypeError",
    "WebLocksValueError", "NameTooLongError", "NotSupportedError",
    "AbortError", "LockStolenError", "InvalidStateError",
    "SecurityError", "QuotaExceededError", "DeadlockError", "CorruptError",
    "FormatError", "WebLocksOSError",
]
