"""Where the cores go while a bench run moves its data: runs ``ss_bench.py`` for one variant
and samples /proc every 0.1 s (the machine's busy share and every process's CPU time) and the
table's files as they appear; prints, for the data phase (first file to last file), how busy
the machine was and how many cores each kind of process used (the broker, the worker, its
executors and REST front, the bench itself).

    .venv/bin/python bench/ss/phase_cpu.py connectd-json-3 --topics <json topic>,x \\
        [--worker-prop consumer.heartbeat.interval.ms=100 ...]

Every argument after the variant goes to ``ss_bench.py`` (``--runs 1`` and ``--records``
default to one run of 1M records). The figures are the machine's, so
run nothing else beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

KINDS = (
    ("kafka.Kafka", "broker"),
    ("daemon.executor.child", "executors"),
    ("daemon.rest.front", "REST front"),
    ("connectd standalone", "worker"),
    ("connectd distributed", "worker"),
    ("ss_bench.py", "bench"),
    ("ss/workers.py", "bench"),
)


def kind(cmdline: str) -> str:
    for needle, name in KINDS:
        if needle in cmdline:
            return name
    return "other"


def processes() -> dict[int, tuple[float, str]]:
    """Every process's CPU seconds (user + system) and command line."""
    out = {}
    for p in psutil.process_iter(["cpu_times", "cmdline"]):
        times, argv = p.info["cpu_times"], p.info["cmdline"]
        if times is not None:  # None: it ended or is not ours to read
            out[p.pid] = (times.user + times.system, " ".join(argv or ()))
    return out


def machine() -> tuple[float, float]:
    """All CPU seconds and idle seconds (idle + iowait) since boot, over every core."""
    t = psutil.cpu_times()
    busy = t.user + t.nice + t.system + t.irq + t.softirq + t.steal
    return busy + t.idle + t.iowait, t.idle + t.iowait


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    variant, rest = argv[0], argv[1:]
    scratch = Path(tempfile.mkdtemp(prefix="phase-cpu-"))
    defaults = [] if "--records" in rest else ["--records", "1000000"]
    command = [sys.executable, str(Path(__file__).parent.parent / "ss_bench.py")]
    command += ["--runs", "1", "--only", variant, "--scratch", str(scratch), *defaults, *rest]
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples: list[tuple[float, tuple[float, float], dict[int, tuple[float, str]]]] = []
    files: dict[Path, float] = {}
    while bench.poll() is None:
        now = time.monotonic()
        for path in scratch.rglob("*.parquet"):
            files.setdefault(path, now)
        samples.append((now, machine(), processes()))
        time.sleep(0.1)
    output = bench.stdout.read() if bench.stdout else ""
    subprocess.run(["rm", "-rf", str(scratch)], check=False)
    if bench.returncode != 0 or len(files) < 2:
        print(output, file=sys.stderr)
        print(f"phase_cpu.py: the bench exited {bench.returncode} with {len(files)} files")
        return 1
    first = min(samples, key=lambda s: abs(s[0] - min(files.values())))
    last = min(samples, key=lambda s: abs(s[0] - max(files.values())))
    wall = last[0] - first[0]
    busy = 1 - (last[1][1] - first[1][1]) / max(0.01, last[1][0] - first[1][0])
    cores: dict[str, float] = {}
    for pid, (cpu, cmdline) in last[2].items():
        before = first[2][pid][0] if pid in first[2] else 0.0
        if cpu > before:
            cores[kind(cmdline)] = cores.get(kind(cmdline), 0.0) + (cpu - before) / wall
    used = ", ".join(f"{k} {v:.2f}" for k, v in sorted(cores.items(), key=lambda kv: -kv[1]))
    print(output.rstrip().splitlines()[-1])
    print(
        f"data phase {wall:.1f} s ({len(files)} files): machine busy {busy:.0%} of "
        f"{os.cpu_count()} cores; cores used: {used}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
