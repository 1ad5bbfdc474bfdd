"""The order a pool starts its executors in (``executor/startorder.py``), decided without
processes: one alone until one is ready, the rest of ``size`` then, spares once writes pause
or after the longest wait."""

from __future__ import annotations

from daemon.executor.startorder import StartOrder


def order() -> StartOrder:
    return StartOrder(size=2, spares=1, spare_quiet=1.0, spare_wait_max=60.0)


def test_one_starts_alone_until_one_is_ready() -> None:
    o = order()
    kw = {"busy": 0, "last_write_end": None, "now": 0.0}
    assert o.plan(existing=0, ready=0, starting=0, **kw) == (1, None)  # type: ignore[arg-type]
    assert o.plan(existing=1, ready=0, starting=1, **kw) == (0, None)  # type: ignore[arg-type]


def test_spares_wait_while_writes_run_and_start_once_they_pause() -> None:
    o = order()
    # One ready and writing: the second of size starts; the spare is put off.
    n, again = o.plan(existing=1, ready=1, starting=0, busy=1, last_write_end=None, now=10.0)
    assert n == 1 and again == 1.0
    n, again = o.plan(existing=2, ready=2, starting=0, busy=1, last_write_end=None, now=11.0)
    assert n == 0 and again is not None
    # The writes ended at 20.0: quiet for 0.5 s is not enough, 1 s is.
    n, again = o.plan(existing=2, ready=2, starting=0, busy=0, last_write_end=20.0, now=20.5)
    assert n == 0 and again == 0.5
    assert o.plan(existing=2, ready=2, starting=0, busy=0, last_write_end=20.0, now=21.0) == (
        1,
        None,
    )


def test_a_spare_put_off_starts_after_the_longest_wait_even_under_writes() -> None:
    o = order()
    assert o.plan(existing=2, ready=2, starting=0, busy=2, last_write_end=5.0, now=100.0)[0] == 0
    assert o.plan(existing=2, ready=2, starting=0, busy=2, last_write_end=150.0, now=159.0)[0] == 0
    assert o.plan(existing=2, ready=2, starting=0, busy=2, last_write_end=159.0, now=160.0) == (
        1,
        None,
    )


def test_an_idle_pool_starts_its_spare_after_the_quiet_time() -> None:
    o = order()
    n, again = o.plan(existing=2, ready=2, starting=0, busy=0, last_write_end=None, now=3.0)
    assert (n, again) == (0, 1.0)  # no write yet: quiet counts from when it was put off
    assert o.plan(existing=2, ready=2, starting=0, busy=0, last_write_end=None, now=4.0) == (
        1,
        None,
    )
    assert o.plan(existing=3, ready=3, starting=0, busy=0, last_write_end=None, now=5.0) == (
        0,
        None,
    )


def test_writes_aside_add_executors_at_once_up_to_the_most() -> None:
    o = StartOrder(size=1, spares=1, spare_quiet=1.0, spare_wait_max=60.0, max_size=3)
    busy = {"ready": 2, "starting": 0, "busy": 2, "last_write_end": None, "now": 10.0}
    # One write stepped aside on one of the two: its place and the spare's are kept, now.
    assert o.plan(existing=2, aside=1, **busy) == (1, None)  # type: ignore[arg-type]
    assert o.plan(existing=3, aside=1, **busy) == (0, None)  # type: ignore[arg-type]
    # Two aside: one more each, but never more than max_size exist.
    assert o.plan(existing=3, aside=2, **busy) == (0, None)  # type: ignore[arg-type]
    # None aside again: what exists beyond size + spares is not replaced once it is gone.
    assert o.plan(existing=2, aside=0, **busy)[0] == 0  # type: ignore[arg-type]
