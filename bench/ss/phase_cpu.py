"""Where the cores go while a bench run moves its data: runs ``ss_bench.py`` for one variant
and samples /proc every 0.1 s (the machine's busy share and every process's CPU time) and the
table's files as they appear; prints, for the data phase (first file to last file), how busy
the machine was and how many cores each kind of process used (the broker, the worker, its
executors and REST front, the bench itself).

    .venv/bin/python bench/ss/phase_cpu.py connectd-json-3 --topics <json topic>,x \\
        [--worker-prop consumer.heartbeat.interval.ms=100 ...]

Every argument after the variant goes to ``ss_bench.py`` (``--runs 1`` and ``--records``
default to one run of 1M records), except ``--py-spy PATH``: then, from the table's first file
on, py-spy (not a project dependency: ``python3 -m venv /tmp/pyspy && /tmp/pyspy/bin/pip
install py-spy``) samples each worker process for ``GIL_SECONDS``, only the thread holding the
interpreter lock (``--gil``), and the script prints how much of that time the lock was held and
by which thread, with each thread's heaviest frames; ``--gil-svg PREFIX`` also writes each
worker's flame graph of the lock's holders as ``PREFIX-w<N>.svg``. The figures are the
machine's, so run nothing else beside it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
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


#: How long the interpreter lock is sampled, from the first table file on (the data phase of
#: 1M records lasts 5-8 s here).
GIL_SECONDS = 3
GIL_RATE = 200  # samples a second


def take_option(argv: list[str], name: str) -> str | None:
    """``name VALUE`` removed from ``argv``; its value, or None."""
    if name not in argv:
        return None
    at = argv.index(name)
    value = argv[at + 1]
    del argv[at : at + 2]
    return value


def sample_lock(
    py_spy: str, scratch: Path, svg: str | None
) -> list[tuple[Path, list[subprocess.Popen[bytes]]]]:
    """py-spy on each worker process, holder of the lock only (module docstring)."""
    out = []
    workers = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if kind(" ".join(p.info["cmdline"] or ())) == "worker"
    ]
    for i, pid in enumerate(workers):
        raw = scratch.parent / f"{scratch.name}-gil-w{i}.raw"
        common = ["record", "--pid", str(pid), "--gil", "--threads", "--nonblocking"]
        common += ["--rate", str(GIL_RATE), "--duration", str(GIL_SECONDS)]
        outputs = [["--format", "raw", "-o", str(raw)]]
        if svg:
            outputs.append(["-o", f"{svg}-w{i}.svg"])  # py-spy's default format: a flame graph
        spies = [
            subprocess.Popen(
                [py_spy, *common, *output], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            for output in outputs
        ]
        out.append((raw, spies))
    return out


def lock_report(raw: Path) -> str:
    """Share of the sampled time the lock was held, by thread, with each thread's top frames."""
    threads: Counter[str] = Counter()
    frames: dict[str, Counter[str]] = {}
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        parts = stack.split(";")
        thread = parts[0].split(": ", 1)[-1]
        thread = thread.split("-bench-")[0]  # a task's conversion thread: its prefix
        threads[thread] += int(count)
        frames.setdefault(thread, Counter())[parts[-1].strip()] += int(count)
    expected = GIL_SECONDS * GIL_RATE
    lines = [f"  interpreter lock held {sum(threads.values()) / expected:.0%} of {GIL_SECONDS} s"]
    for thread, n in threads.most_common(4):
        top = ", ".join(f"{f} {c / expected:.0%}" for f, c in frames[thread].most_common(3))
        lines.append(f"    {thread}: {n / expected:.0%} ({top})")
    return "\n".join(lines)


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
    py_spy, svg = take_option(rest, "--py-spy"), take_option(rest, "--gil-svg")
    scratch = Path(tempfile.mkdtemp(prefix="phase-cpu-"))
    defaults = [] if "--records" in rest else ["--records", "1000000"]
    command = [sys.executable, str(Path(__file__).parent.parent / "ss_bench.py")]
    command += ["--runs", "1", "--only", variant, "--scratch", str(scratch), *defaults, *rest]
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples: list[tuple[float, tuple[float, float], dict[int, tuple[float, str]]]] = []
    files: dict[Path, float] = {}
    spies: list[tuple[Path, list[subprocess.Popen[bytes]]]] = []
    while bench.poll() is None:
        now = time.monotonic()
        for path in scratch.rglob("*.parquet"):
            files.setdefault(path, now)
        if py_spy and files and not spies:
            spies = sample_lock(py_spy, scratch, svg)
        samples.append((now, machine(), processes()))
        time.sleep(0.1)
    output = bench.stdout.read() if bench.stdout else ""
    for _, procs in spies:
        for proc in procs:
            proc.wait()
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
    for i, (raw, _) in enumerate(spies):
        print(f"worker {i}:\n{lock_report(raw)}" if raw.exists() else f"worker {i}: no samples")
        raw.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
