# SPDX-License-Identifier: MIT
"""One bucket shared by C, Node and Python processes at once.

Each language has a peer (tests/peers: peer.c, peer.js, peer.py) speaking
the same line protocol. The C peer is compiled here against the library
under test (needs cc). The Node peer needs the Node bindings
(bindings/node, built); without them the cases that include Node are
skipped with the reason, and the C + Python cases run.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import List

import pytest

from conftest import HERE, SRCDIR, pending_names, python_peer, wait_until

from weblocks import LockManager

# WEBLOCKS_NODE_BINDINGS: another checkout's bindings/node, built.
NODE_BINDINGS = Path(os.environ.get("WEBLOCKS_NODE_BINDINGS") or
                     SRCDIR / "bindings" / "node")


def _library() -> Path:
    lib = os.environ.get("WEBLOCKS_LIBRARY")
    if not lib:
        pytest.skip("WEBLOCKS_LIBRARY is not set: no build to link the C "
                    "peer against")
    return Path(lib).absolute()


@pytest.fixture(scope="session")
def c_peer(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler for the C peer")
    lib = _library()
    out = tmp_path_factory.mktemp("peer") / "peer-c"
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror",
                    f"-I{SRCDIR / 'include'}", str(HERE / "peers" / "peer.c"),
                    "-o", str(out), f"-L{lib.parent}", "-l:" + lib.name,
                    f"-Wl,-rpath,{lib.parent}"], check=True)
    return out


def _node_missing() -> str:
    """Why the Node peer cannot run, or "" if it can."""
    if not NODE_BINDINGS.is_dir():
        return (f"{NODE_BINDINGS} is absent: the Node bindings have not "
                "landed on this branch")
    if shutil.which("node") is None:
        return "node is not installed"
    probe = subprocess.run(
        ["node", "-e", f"require({str(NODE_BINDINGS)!r}).LockManager"],
        capture_output=True, text=True, timeout=60)
    if probe.returncode:
        return (f"require({str(NODE_BINDINGS)!r}) failed (bindings not "
                f"built?): {probe.stderr.strip().splitlines()[-1:]}")
    return ""


LANGS = [pytest.param(("c", "python"), id="c+python"),
         pytest.param(("c", "node", "python"), id="c+node+python")]


@pytest.fixture(params=LANGS)
def start(request, origin, peers, c_peer):
    """start(lang) starts a peer of that language on the test's bucket."""
    langs = request.param
    if "node" in langs:
        why = _node_missing()
        if why:
            pytest.skip(f"Node part of the interoperability test: {why}")

    def argv(lang: str) -> List[str]:
        if lang == "c":
            return [str(c_peer), origin]
        if lang == "node":
            return ["node", str(HERE / "peers" / "peer.js"),
                    str(NODE_BINDINGS), origin]
        return python_peer(origin)

    return lambda lang: peers(argv(lang)), langs


def test_fifo_across_languages(origin, start):
    new, langs = start
    procs = [(lang, new(lang)) for lang in langs * 2]
    with LockManager(origin) as locks:
        with locks.request("r"):
            for i, (_, p) in enumerate(procs):
                p.send("acquire r exclusive")
                wait_until(lambda: len(locks.query().pending) == i + 1,
                           "queued")
        for lang, p in procs:
            p.expect("granted")
            assert [h.client_id for h in locks.query().held] == [
                p.client_id], f"{lang} peer granted out of order"
            p.send("release r")
            p.expect("released")


def test_shared_lock_held_by_all_languages(origin, start):
    new, langs = start
    procs = [new(lang) for lang in langs]
    for p in procs:
        p.send("acquire s shared")
        p.expect("granted")
    everyone = sorted(("s", "shared", p.client_id) for p in procs)
    for p in procs:
        # Each sees the others' shared locks beside its own.
        assert sorted(p.query()["held"]) == everyone
    with LockManager(origin) as locks:
        with locks.request("s", if_available=True) as lock:
            assert lock is None


def test_query_from_each_language_shows_the_others(origin, start):
    new, langs = start
    procs = [new(lang) for lang in langs]
    procs[0].send("acquire q exclusive")
    procs[0].expect("granted")
    with LockManager(origin) as locks:
        for i, p in enumerate(procs[1:]):
            p.send("acquire q exclusive")
            wait_until(lambda: len(locks.query().pending) == i + 1,
                       "queued")
    want_pending = [("q", "exclusive", p.client_id) for p in procs[1:]]
    for p in procs:
        seen = p.query()
        assert seen["held"] == [("q", "exclusive", procs[0].client_id)]
        assert seen["pending"] == want_pending


def test_killed_holder_in_each_language(origin, start):
    new, langs = start
    with LockManager(origin) as locks:
        for i, lang in enumerate(langs):
            other = langs[(i + 1) % len(langs)]
            holder, waiter = new(lang), new(other)
            name = f"k{i}"
            holder.send(f"acquire {name} exclusive")
            holder.expect("granted")
            waiter.send(f"acquire {name} exclusive")
            wait_until(lambda: pending_names(locks) == [name], "queued")
            holder.kill()
            waiter.expect("granted")
            held = [h.client_id for h in locks.query().held
                    if h.name == name]
            assert held == [waiter.client_id], \
                f"{other} waiter not granted after the {lang} holder died"
            waiter.send(f"release {name}")
            waiter.expect("released")
