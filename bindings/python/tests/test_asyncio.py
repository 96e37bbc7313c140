# SPDX-License-Identifier: MIT
"""asyncio: async with never blocks the loop; cancelling a task withdraws
its queued request."""
from __future__ import annotations

import asyncio

import pytest

from weblocks import (AbortController, AbortError, InvalidStateError,
                      LockManager, LockStolenError, NotSupportedError,
                      TimeoutError)

from conftest import WAIT


async def _until(cond, what):
    """Wait for a condition, yielding to the loop in between."""
    loop = asyncio.get_running_loop()
    end = loop.time() + WAIT
    while not cond():
        assert loop.time() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


def _pending(m):
    return [p.name for p in m.query().pending]


def test_async_with_waits_without_blocking_the_loop(origin):
    async def main():
        with LockManager(origin) as a, LockManager(origin) as b:
            order = []

            async def waiter():
                async with b.request("r", mode="shared") as lock:
                    order.append(("granted", lock.mode))

            async with a.request("r") as held:
                assert held.mode == "exclusive"
                task = asyncio.create_task(waiter())
                await _until(lambda: _pending(a) == ["r"], "queued")
                # The loop runs other coroutines while the task waits.
                for i in range(3):
                    await asyncio.sleep(0)
                    order.append(i)
                assert not task.done()
            await asyncio.wait_for(task, WAIT)
            assert order == [0, 1, 2, ("granted", "shared")]
            assert a.query().held == []

    asyncio.run(main())


def test_task_cancellation_aborts_a_queued_request(origin):
    async def main():
        with LockManager(origin) as a, LockManager(origin) as b:
            async with a.request("r"):
                task = asyncio.create_task(b.request("r").__aenter__())
                await _until(lambda: _pending(a) == ["r"], "queued")
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await _until(lambda: _pending(a) == [], "withdrawn")
                assert len(a.query().held) == 1
            # Nothing of b's was left behind.
            async with b.request("r", if_available=True) as lock:
                assert lock is not None

    asyncio.run(main())


def test_wait_for_timeout_withdraws_the_request(origin):
    async def main():
        with LockManager(origin) as a, LockManager(origin) as b:
            async with a.request("r"):
                async def take():
                    async with b.request("r"):
                        pytest.fail("granted")

                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(take(), 0.05)
                await _until(lambda: _pending(a) == [], "withdrawn")

    asyncio.run(main())


def test_async_callback_form_and_release_on_exception(origin):
    async def main():
        with LockManager(origin) as a:
            async def cb(lock):
                await asyncio.sleep(0)
                return lock.name, lock.mode

            assert await a.request("r", cb, mode="shared") == ("r", "shared")

            async def boom(lock):
                raise KeyError("inside")

            with pytest.raises(KeyError):
                await a.request("r", boom)
            with pytest.raises(ValueError):
                async with a.request("r"):
                    raise ValueError("inside")
            assert a.query().held == []

    asyncio.run(main())


def test_async_options_and_errors(origin):
    async def main():
        with LockManager(origin) as a, LockManager(origin) as b:
            async with a.request("r"):
                async with b.request("r", if_available=True) as lock:
                    assert lock is None
                with pytest.raises(TimeoutError):
                    async with b.request("r", timeout=0.02):
                        pytest.fail("granted")
                ctl = AbortController()
                task = asyncio.create_task(
                    b.request("r", signal=ctl.signal).__aenter__())
                await _until(lambda: _pending(a) == ["r"], "queued")
                ctl.abort()
                with pytest.raises(AbortError):
                    await task
                with pytest.raises(NotSupportedError):
                    async with b.request("-r"):
                        pass
            with pytest.raises(LockStolenError):
                async with a.request("s"):
                    async with b.request("s", steal=True) as lock:
                        assert lock is not None
            assert a.query().held == [] and a.query().pending == []

    asyncio.run(main())


def test_fifo_between_tasks_of_two_managers(origin):
    async def main():
        with LockManager(origin) as a, LockManager(origin) as b:
            order = []

            async def take(m, i):
                async with m.request("r"):
                    order.append(i)
                    await asyncio.sleep(0)

            async with a.request("r"):
                tasks = []
                for i in range(6):
                    tasks.append(asyncio.create_task(take((a, b)[i % 2], i)))
                    await _until(lambda: len(_pending(a)) == i + 1, "queued")
            await asyncio.wait_for(asyncio.gather(*tasks), WAIT)
            assert order == list(range(6))

    asyncio.run(main())


def test_close_ends_a_queued_async_request(origin):
    async def main():
        with LockManager(origin) as a:
            b = LockManager(origin)
            async with a.request("r"):
                task = asyncio.create_task(b.request("r").__aenter__())
                await _until(lambda: _pending(a) == ["r"], "queued")
                b.close()
                with pytest.raises(InvalidStateError):
                    await asyncio.wait_for(task, WAIT)
                assert a.query().pending == []

    asyncio.run(main())
