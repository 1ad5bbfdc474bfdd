"""Commit log benchmark: ``open()`` time, commit rate and memory after 1k, 100k and 1M commits.

Synthetic history on local disk: empty commits (no data files; the log's own cost only) to two
partitions, through ``CommitLog`` itself (every record published exclusively and fsynced), with a
checkpoint every ``--interval`` commits and the clean-up (``CommitLog.clean_up``) run after each
checkpoint, as the sink runs it. Retention is 0 by default so the disk stays small at 1M commits
(``--retention-ms`` keeps records longer: ``open`` does not read them either way). At each size,
fresh processes open the log: the time of ``open()`` (median of ``--opens``) and the process's
peak RSS (``VmHWM``), against the same process importing the module without opening anything.
Numbers are measured and printed, never asserted.

``--fast-history`` builds the history past the first ``--fsync-commits`` (1,000) commits without
fsync: in this process only, ``os.fsync`` as ``daemon.storage.atomic`` calls it (the only fsync
of the local log) becomes a no-op, which builds history about twice as fast here (511 against
251 commits/s on a loaded 2-core machine). What ``open()`` reads is the same files either way;
the opens always run in fresh processes with the real code. The first commits keep fsync so the
table still shows the real commit rate beside the fast one.

    .venv/bin/python bench/commitlog_bench.py            # 1k, 100k, 1M commits
    .venv/bin/python bench/commitlog_bench.py --fast-history   # the same, history unsynced past 1k
    .venv/bin/python bench/commitlog_bench.py --quick    # 1k, 10k, 100k
    .venv/bin/python bench/commitlog_bench.py --sizes 1000,20000 --no-checkpoints   # before
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from daemon.storage import CommitLog, atomic  # noqa: E402
from daemon.structs import OffsetRange, TopicPartition  # noqa: E402

PARTITIONS = (TopicPartition("bench", 0), TopicPartition("bench", 1))
NO_CHECKPOINTS = 10**15  # an interval never reached: the log as it was before checkpoints


def _vm(field: str) -> int:
    """A ``/proc/self/status`` figure in kB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure_open(table: str, interval: int, baseline: bool) -> dict[str, Any]:
    """In a fresh process (``--open``): open the log once; its time and the peak RSS."""
    hwm_before = _vm("VmHWM")
    began = time.perf_counter()
    if not baseline:
        log = CommitLog(table, checkpoint_interval=interval).open()
        elapsed = time.perf_counter() - began
        in_memory = log.records_in_memory()
        seq = log.last_seq()
        log.close()
    else:
        elapsed, in_memory, seq = 0.0, 0, 0
    return {
        "open_s": elapsed,
        "hwm_kb": _vm("VmHWM"),
        "hwm_before_kb": hwm_before,
        "in_memory": in_memory,
        "seq": seq,
    }


def open_in_fresh_process(table: Path, interval: int, *, baseline: bool = False) -> dict[str, Any]:
    args = [sys.executable, __file__, "--open", str(table), "--interval", str(interval)]
    out = subprocess.run(
        [*args, *(["--baseline"] if baseline else [])], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, Any] = json.loads(out)
    return result


class _OsWithoutFsync:
    """``os`` as ``daemon.storage.atomic`` sees it under ``--fast-history``: ``fsync`` does
    nothing (and is counted, so the header can show the patch took effect)."""

    def __init__(self) -> None:
        self.skipped = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def fsync(self, fd: int) -> None:
        self.skipped += 1


@contextlib.contextmanager
def no_fsync(fake: _OsWithoutFsync) -> Iterator[None]:
    """Within: the commit log's fsyncs (all in ``daemon.storage.atomic``) are skipped. Patches
    that module's ``os`` name only, not the ``os`` module, and only in this process."""
    with mock.patch.object(atomic, "os", fake):
        yield


def rate(made: int, took: float) -> str:
    return f"{made / took:,.0f}" if made and took else "-"


def grow(log: CommitLog, upto: int, interval: int) -> tuple[int, float, float]:
    """Commit until the log has ``upto`` records; (commits made, seconds, clean-up seconds)."""
    ends = log.committed_offsets()
    seq = log.last_seq()
    made, cleaning = 0, 0.0
    began = time.perf_counter()
    while seq < upto:
        tp = PARTITIONS[seq % len(PARTITIONS)]
        start = ends.get(tp, 0)
        record = log.commit(
            "bench",
            0,
            1,
            [OffsetRange(tp.topic, tp.partition, start, start + 1)],
            commit_id=log.new_commit_id(),
        )
        ends[tp], seq, made = start + 1, record.seq, made + 1
        if seq % interval == 0:
            t = time.perf_counter()
            log.clean_up(deadline=time.monotonic() + 10.0)
            cleaning += time.perf_counter() - t
    return made, time.perf_counter() - began, cleaning


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="1k, 10k and 100k commits")
    p.add_argument("--sizes", help="comma-separated commit counts (default 1000,100000,1000000)")
    p.add_argument("--interval", type=int, default=100, help="checkpoint interval (100)")
    p.add_argument("--retention-ms", type=int, default=0, help="records kept this long (0)")
    p.add_argument("--no-checkpoints", action="store_true", help="the log before checkpoints")
    p.add_argument("--opens", type=int, default=3, help="fresh-process opens per size (3)")
    p.add_argument("--dir", help="where the table goes (default: a temporary dir on /var/tmp)")
    p.add_argument(
        "--fast-history",
        action="store_true",
        help="build the history past --fsync-commits without fsync (opens keep the real code)",
    )
    p.add_argument(
        "--fsync-commits",
        type=int,
        default=1000,
        help="with --fast-history: commits made with fsync first, for the real rate (1000)",
    )
    p.add_argument("--open", help=argparse.SUPPRESS)
    p.add_argument("--baseline", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.open:
        print(json.dumps(measure_open(a.open, a.interval, a.baseline)))
        return
    sizes = [int(s) for s in (a.sizes or "1000,100000,1000000").split(",")]
    if a.quick and not a.sizes:
        sizes = [1000, 10_000, 100_000]
    interval = NO_CHECKPOINTS if a.no_checkpoints else a.interval
    synced_upto = a.fsync_commits if a.fast_history else max(sizes)
    fake_os = _OsWithoutFsync()
    root = Path(tempfile.mkdtemp(prefix="commitlog-bench-", dir=a.dir or "/var/tmp"))
    table = root / "table"
    base = open_in_fresh_process(table, interval, baseline=True)
    mode = "no checkpoints" if a.no_checkpoints else f"checkpoint every {a.interval}"
    began = time.monotonic()
    print(
        f"commit log on {table} ({mode}, retention {a.retention_ms} ms); "
        f"process peak RSS before open: {base['hwm_kb'] / 1024:.1f} MB; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if a.fast_history:
        print(
            f"--fast-history: commits past {synced_upto:,} are made WITHOUT fsync "
            "(daemon.storage.atomic's os.fsync a no-op in this process; column no-fsync/s); "
            "open() runs in fresh processes with the real code"
        )
    header = (
        f"{'commits':>9} {'commit/s':>9} {'no-fsync/s':>10} {'clean-up s':>10} {'open() s':>9} "
        f"{'open() range':>15} {'peak RSS MB':>11} {'+RSS by open MB':>15} {'in memory':>9} "
        f"{'log files':>9}"
    )
    print(header, flush=True)
    try:
        log = CommitLog(table, checkpoint_interval=interval, retention_ms=a.retention_ms).open()
        for size in sizes:
            # commit/s: with fsync, the real rate; no-fsync/s: --fast-history's, not the log's.
            made, took, cleaning = grow(log, min(size, synced_upto), interval)
            with no_fsync(fake_os):
                fast_made, fast_took, fast_cleaning = grow(log, size, interval)
            opens = [open_in_fresh_process(table, interval) for _ in range(a.opens)]
            assert all(o["seq"] == size for o in opens), opens
            times = [o["open_s"] for o in opens]
            hwm = statistics.median(o["hwm_kb"] for o in opens)
            files = sum(1 for _ in (table / "_connectd" / "log").iterdir())
            print(
                f"{size:>9,} {rate(made, took):>9} {rate(fast_made, fast_took):>10} "
                f"{cleaning + fast_cleaning:>10.1f} {statistics.median(times):>9.4f} "
                f"{min(times):>7.4f}-{max(times):<7.4f} {hwm / 1024:>11.1f} "
                f"{(hwm - base['hwm_kb']) / 1024:>15.1f} {opens[0]['in_memory']:>9,} {files:>9,}",
                flush=True,
            )
        log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"took {(time.monotonic() - began) / 60:.1f} min; fsyncs skipped: {fake_os.skipped:,}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
