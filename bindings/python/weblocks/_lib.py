# SPDX-License-Identifier: MIT
"""Loading libweblocks and declaring the C functions (ctypes).

The library is found, in this order, by:

1. :func:`load_library` called with a path before the first use;
2. the environment variable ``WEBLOCKS_LIBRARY``, the path of the ``.so``
   (for an in-tree build: ``BUILDDIR/lib/.libs/libweblocks.so``);
3. ``ctypes.util.find_library("weblocks")``, the installed library;
4. the soname ``libweblocks.so.1`` given to the dynamic loader as is.

Every function that may wait (open, acquire, release, query, dispatch,
bucket removal) is called through :class:`ctypes.CDLL`, which releases the
GIL for the duration of the call, so other Python threads run while one
waits for a lock.

The two calls of an uncontended request (see manager.py) are the library's
one-argument forms for such callers, wlk_call_acquire() and
wlk_call_release() on a :class:`Call` block filled in once per name (ctypes
pays for every argument of every call), through a copy without argument
types, :func:`unchecked`: ctypes then converts nothing and its callers pass
the block's ``byref``, made once.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char_p, c_int,
                    c_size_t, c_uint, c_uint32, c_uint64, c_void_p)
from typing import Any, Optional

SONAME = "libweblocks.so.1"
ENV_VAR = "WEBLOCKS_LIBRARY"

# Error codes (include/weblocks.h, WLK_ERRNO_MAP).
EINVAL = -22
EDEADLK = -35
ENAMETOOLONG = -36
ETIMEDOUT = -110
ENOTSUPPORTED = -3001
EABORTED = -3002
ESTOLEN = -3003
ESTATE = -3004
ESECURITY = -3005
EFULL = -3006
ECORRUPT = -3007
EFORMAT = -3008

EXCLUSIVE = 0
SHARED = 1
NUL_TERMINATED = ctypes.c_size_t(-1).value


class Options(Structure):
    """struct wlk_options (LockOptions)."""
    _fields_ = [("size", c_size_t), ("mode", c_int),
                ("if_available", c_bool), ("steal", c_bool),
                ("signal", c_void_p), ("timeout_ns", c_uint64)]


class ManagerOptions(Structure):
    """struct wlk_manager_options."""
    _fields_ = [("size", c_size_t), ("bucket", c_char_p),
                ("partition", c_char_p), ("client_id", c_char_p),
                ("permissions", c_uint), ("max_names", c_uint32),
                ("max_requests", c_uint32), ("max_name_len", c_uint32),
                ("detect_deadlocks", c_bool)]


class LockInfoC(Structure):
    """struct wlk_lock_info (LockInfo)."""
    _fields_ = [("name", c_void_p), ("name_len", c_size_t),
                ("mode", c_int), ("client_id", c_char_p), ("pid", c_int)]


class Call(Structure):
    """struct wlk_call: wlk_acquire()'s arguments and result in one block."""
    _fields_ = [("m", c_void_p), ("name", c_char_p), ("name_len", c_size_t),
                ("o", c_void_p), ("lock", c_void_p)]


# typedef void (*wlk_granted_cb)(struct wlk_async *, int, struct wlk_lock *,
#                                void *);
GRANTED_CB = CFUNCTYPE(None, c_void_p, c_int, c_void_p, c_void_p)

_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


def _declare(lib: ctypes.CDLL) -> None:
    """Give every function its C prototype."""
    vp, sz = c_void_p, c_size_t
    protos = {
        "wlk_manager_open": (c_int, [c_char_p, POINTER(ManagerOptions),
                                     POINTER(c_void_p)]),
        "wlk_manager_close": (None, [vp]),
        "wlk_manager_client_id": (c_char_p, [vp]),
        "wlk_bucket_remove": (c_int, [c_char_p, POINTER(ManagerOptions)]),
        "wlk_acquire": (c_int, [vp, c_char_p, sz, POINTER(Options),
                                POINTER(c_void_p)]),
        "wlk_release": (c_int, [vp]),
        "wlk_call_acquire": (c_int, [POINTER(Call)]),
        "wlk_call_release": (c_int, [POINTER(Call)]),
        "wlk_lock_name": (vp, [vp, POINTER(sz)]),
        "wlk_lock_mode": (c_int, [vp]),
        "wlk_lock_stolen": (c_bool, [vp]),
        "wlk_lock_token": (c_uint64, [vp]),
        "wlk_signal_new": (c_int, [POINTER(c_void_p)]),
        "wlk_signal_abort": (None, [vp, c_int]),
        "wlk_signal_aborted": (c_bool, [vp]),
        "wlk_signal_free": (None, [vp]),
        "wlk_query": (c_int, [vp, POINTER(c_void_p)]),
        "wlk_snapshot_held_count": (sz, [vp]),
        "wlk_snapshot_held": (POINTER(LockInfoC), [vp, sz]),
        "wlk_snapshot_pending_count": (sz, [vp]),
        "wlk_snapshot_pending": (POINTER(LockInfoC), [vp, sz]),
        "wlk_snapshot_free": (None, [vp]),
        "wlk_strerror": (c_char_p, [c_int]),
        "wlk_error_name": (c_char_p, [c_int]),
        "wlk_version": (c_uint, []),
        "wlk_version_string": (c_char_p, []),
        "wlk_request_async": (c_int, [vp, c_char_p, sz, POINTER(Options),
                                      GRANTED_CB, vp, POINTER(c_void_p)]),
        "wlk_async_cancel": (c_int, [vp]),
        "wlk_manager_fd": (c_int, [vp]),
        "wlk_manager_dispatch": (c_int, [vp]),
    }
    for name, (restype, argtypes) in protos.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def load_library(path: Optional[str] = None) -> ctypes.CDLL:
    """Load libweblocks and return it; later calls return the same one.

    Args:
        path: the shared object to load. Only the first load counts: once
            the library is loaded, a different path raises RuntimeError.

    Raises:
        OSError: the library could not be found or loaded.
    """
    global _lib
    with _lib_lock:
        if _lib is not None:
            if path is not None and path != _lib._name:
                raise RuntimeError(
                    f"libweblocks already loaded from {_lib._name}")
            return _lib
        candidates = [path] if path else []
        if not candidates and os.environ.get(ENV_VAR):
            candidates = [os.environ[ENV_VAR]]
        if not candidates:
            found = ctypes.util.find_library("weblocks")
            candidates = [found] if found else []
            candidates.append(SONAME)
        errors = []
        for cand in candidates:
            try:
                lib = ctypes.CDLL(cand)
            except OSError as e:
                errors.append(str(e))
                continue
            _declare(lib)
            _lib = lib
            return lib
        raise OSError("libweblocks not found (set WEBLOCKS_LIBRARY to the "
                      "path of libweblocks.so): " + "; ".join(errors))


def unchecked(name: str, restype: Any = c_int) -> Any:
    """A second function object for the C function ``name``, with no
    argument types: every argument must be given as a ctypes object of the
    parameter's exact C type (or as a ``from_param``/``byref`` result, or
    bytes for a ``const char *``). A Python int would be passed as a C int,
    which is wrong for a pointer or a size_t, so callers never pass one."""
    loaded = lib()
    fn = loaded._FuncPtr((name, loaded))
    fn.restype = restype
    return fn


def lib() -> ctypes.CDLL:
    """The loaded library, loading it on first use."""
    return _lib if _lib is not None else load_library()
