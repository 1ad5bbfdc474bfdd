"""Epochs: one persisted, ever-growing counter per connector.

Every task incarnation draws an epoch from its connector's counter (not a per-task one), so
whichever task owns a partition now holds a larger epoch than every earlier owner, across
restarts, rebalances and daemon restarts. Sinks record it with their commits and refuse older
ones (``daemon.storage.CommitLog``).

This store keeps the counters in local files (standalone mode); distributed mode will draw them
from the config topic behind the same ``next_epoch`` call.

The store is a cache, not the authority: a sink that records epochs with its data (a table's
commit log) knows the last epoch that wrote there. When the state directory was lost or is
another one, the counter restarts below it; the sink then asks, while opening partitions, for
an epoch above its last one (``SinkTaskContext.raise_epoch`` → ``next_epoch(floor=last + 1)``),
and the counter catches up.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

from daemon.errors import StorageCorrupt
from daemon.storage.atomic import atomic_write, fsync_dir


class Epochs(Protocol):
    """Where incarnations draw their epochs: ``next_epoch_async`` returns, for one connector, a
    number greater than every one returned before (by this source, on any process sharing it)
    and at least ``floor``."""

    async def next_epoch_async(self, connector: str, *, floor: int = 1) -> int: ...


class EpochStore:
    """Per-connector epoch counters in ``<state_dir>/epochs/``.

    ``next_epoch`` returns a number strictly greater than every number it returned before for
    that connector, in this process or an earlier one: the new high-water mark is written
    (atomically, fsynced) *before* it is returned, so a kill at any point can skip a number but
    never hand one out twice.

    Safe for concurrent callers: threads (a lock) and processes on the same host (an exclusive
    ``flock`` on ``epochs/.lock`` around each read-increment-write). ``next_epoch`` blocks for an
    fsync or two; from a coroutine use ``await next_epoch_async(...)``, which runs it in a thread.
    """

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(state_dir) / "epochs"
        self._lock = threading.Lock()

    def next_epoch(self, connector: str, *, floor: int = 1) -> int:
        """A new epoch for ``connector``: greater than all earlier ones and at least ``floor``.

        Pass ``floor = commit_log.last_epoch(connector) + 1`` when a sink may have seen epochs
        this store has not (its state directory was lost or moved).
        """
        with self._locked():
            epoch = max(self._read(connector) + 1, floor)
            self._write(connector, epoch)
            return epoch

    async def next_epoch_async(self, connector: str, *, floor: int = 1) -> int:
        """``next_epoch`` off the event loop."""
        return await asyncio.to_thread(self.next_epoch, connector, floor=floor)

    def current(self, connector: str) -> int:
        """The largest epoch handed out for ``connector`` so far (0 if none)."""
        with self._locked():
            return self._read(connector)

    def _path(self, connector: str) -> Path:
        name = quote(connector, safe="")
        if len(name) > 200:  # file names are limited to 255 bytes
            name = hashlib.sha256(connector.encode()).hexdigest()
        return self.dir / f"epoch-{name}.json"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            if not self.dir.is_dir():
                self.dir.mkdir(parents=True, exist_ok=True)
                fsync_dir(self.dir.parent)
            fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock

    def _read(self, connector: str) -> int:
        path = self._path(connector)
        try:
            doc = json.loads(path.read_bytes())
        except FileNotFoundError:
            return 0
        except ValueError as e:
            raise StorageCorrupt(f"epoch file {path} is not valid JSON ({e}); {_FIX}") from e
        if not (
            isinstance(doc, dict)
            and doc.get("connector") == connector
            and isinstance(doc.get("epoch"), int)
            and doc["epoch"] >= 0
        ):
            raise StorageCorrupt(f"epoch file {path} does not hold {connector!r}'s epoch; {_FIX}")
        epoch: int = doc["epoch"]
        return epoch

    def _write(self, connector: str, epoch: int) -> None:
        doc = {"connector": connector, "epoch": epoch}
        atomic_write(self._path(connector), json.dumps(doc).encode())


_FIX = (
    "move it aside and restart: the next epoch is then taken from the sinks' commit logs "
    "(pass floor=last_epoch+1)"
)
