"""Epochs: strictly growing per connector, across restarts, kills and concurrent callers."""

from __future__ import annotations

import asyncio
import os
import threading
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from daemon.errors import StorageCorrupt
from daemon.storage import EpochStore

if TYPE_CHECKING:
    from unit.storage.conftest import Kit

REAL_WRITE = os.write


def test_epochs_grow_per_connector_and_persist(tmp_path: Path) -> None:
    store = EpochStore(tmp_path)
    assert store.current("a") == 0
    assert [store.next_epoch("a") for _ in range(3)] == [1, 2, 3]
    assert store.next_epoch("b") == 1  # one counter per connector
    again = EpochStore(tmp_path)  # a restarted daemon
    assert again.current("a") == 3 and again.next_epoch("a") == 4


def test_floor_lifts_the_counter(tmp_path: Path) -> None:
    """A sink saw epoch 41 (state dir lost): the next epoch must beat it."""
    store = EpochStore(tmp_path)
    assert store.next_epoch("a", floor=42) == 42
    assert store.next_epoch("a", floor=10) == 43


@pytest.mark.parametrize("name", ["with/slash", ".", "..", "ünï cödé", "x" * 300, "a%2Fb"])
def test_any_connector_name_gets_its_own_file(tmp_path: Path, name: str) -> None:
    store = EpochStore(tmp_path)
    assert store.next_epoch(name) == 1 and store.next_epoch(name) == 2
    assert store.next_epoch("a/b") == 1  # "a%2Fb" and "a/b" do not collide
    files = [p for p in (tmp_path / "epochs").iterdir() if p.name != ".lock"]
    assert all(p.parent == tmp_path / "epochs" and len(p.name) < 256 for p in files)


def test_damaged_file_is_reported(tmp_path: Path) -> None:
    store = EpochStore(tmp_path)
    store.next_epoch("a")
    (path,) = [p for p in (tmp_path / "epochs").iterdir() if p.name.startswith("epoch-")]
    path.write_text("{garbage")
    with pytest.raises(StorageCorrupt, match="not valid JSON"):
        store.next_epoch("a")
    path.write_text('{"connector": "other", "epoch": 5}')
    with pytest.raises(StorageCorrupt, match="does not hold"):
        store.current("a")


async def test_concurrent_coroutines_and_threads_get_distinct_epochs(tmp_path: Path) -> None:
    store = EpochStore(tmp_path)
    from_tasks = await asyncio.gather(*(store.next_epoch_async("a") for _ in range(20)))
    from_threads: list[int] = []
    lock = threading.Lock()

    def grab() -> None:
        for _ in range(10):
            e = EpochStore(tmp_path).next_epoch("a")
            with lock:
                from_threads.append(e)

    threads = [threading.Thread(target=grab) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    every = [*from_tasks, *from_threads]
    assert sorted(every) == list(range(1, 51))


def test_concurrent_processes_get_distinct_epochs(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 1
            try:
                store = EpochStore(tmp_path)
                for _ in range(10):
                    REAL_WRITE(write_fd, b"%d\n" % store.next_epoch("a"))
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        epochs = [int(line) for line in pipe.read().split()]
    assert codes == [0] * 4
    assert sorted(epochs) == list(range(1, 41))


def test_killed_at_every_step_never_repeats_an_epoch(kit: Kit, tmp_path: Path) -> None:
    """The child reports each epoch it was given; after a kill anywhere, the next epoch is
    larger than all of them."""
    for step in count():
        state = tmp_path / f"s{step}"
        EpochStore(state).next_epoch("a")  # 1 handed out before
        read_fd, write_fd = os.pipe()

        def draw(state: Path = state, write_fd: int = write_fd) -> None:
            store = EpochStore(state)
            for _ in range(3):
                REAL_WRITE(write_fd, b"%d\n" % store.next_epoch("a"))

        status = kit.run_killed_at(step, draw)
        os.close(write_fd)
        with os.fdopen(read_fd, "rb") as pipe:
            given = [1, *(int(line) for line in pipe.read().split())]
        assert status in (0, kit.killed)
        after = EpochStore(state).next_epoch("a")
        assert after > max(given), (step, given, after)
        assert given == sorted(set(given))  # strictly increasing, no repeats
        if status == 0:
            assert given == [1, 2, 3, 4]
            break
