"""A job format's jobs without Spark (``daemon.connectors.tables.jobtables``), for unit tests of
the one table sink task (``daemon.connectors.tables.task``) run by ``LocalRunner``: the "table"
is a JSON file of each partition's committed offset; ``open_table`` takes ``delay`` seconds
(an executor starting)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _read(path: str) -> dict[str, int]:
    p = Path(path)
    return json.loads(p.read_text()) if p.exists() else {}  # type: ignore[no-any-return]


def open_table(
    spark: Any,
    batch: Any,
    *,
    path: str,
    connector: str,
    task: int,
    epoch: int,
    partitions: Sequence[Sequence[Any]],
    delay: float = 0.0,
    takeover: Sequence[str] = (),
) -> dict[str, Any]:
    time.sleep(delay)
    offsets = _read(path)
    return {
        "newest_epoch": -1,
        "fenced": False,
        "exists": bool(offsets),
        "offsets": [[t, p, offsets.get(f"{t}/{p}")] for t, p in partitions],
        "state": {},
        "schema": None,
        "partition_by": None,
    }


def commit(spark: Any, batch: Any, *, path: str, ranges: Sequence[Sequence[Any]], **_: Any) -> Any:
    offsets = _read(path)
    for t, p, start, end in ranges:
        assert offsets.get(f"{t}/{p}", start) == start, (offsets, t, p, start)
        offsets[f"{t}/{p}"] = end
    Path(path).write_text(json.dumps(offsets))
    rows = 0 if batch is None else batch.num_rows
    return {"state": {}, "rows": rows, "files": 1, "seconds": 0.0, "schema": None}
