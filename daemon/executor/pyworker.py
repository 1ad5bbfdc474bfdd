"""PySpark's Python worker daemon, with workers that die with it (``spark.python.daemon.module``).

PySpark's own daemon (``pyspark.daemon``) puts itself in a process group of its own and forks
one worker per Python task. A worker stuck in a UDF never notices that its daemon or JVM is gone.
Here every forked worker arms a parent-death signal (SIGKILL) first, so it dies with the daemon;
the daemon itself exits as soon as its JVM is gone (EOF on its stdin, which it watches).

The daemon does not arm a parent-death signal for itself: its parent is a JVM thread (the task
thread that first needed Python), and the signal fires when that *thread* ends. Spark retires
idle task threads after 60 s, which would kill a healthy daemon and every running worker.
Everything else is PySpark's code, unchanged.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from daemon.executor.process import set_parent_death_signal


def main() -> None:
    import pyspark.daemon

    pyspark_daemon: Any = pyspark.daemon
    daemon_pid = os.getpid()
    original = pyspark_daemon.worker

    def worker(sock: Any, authenticated: Any) -> Any:
        # In the forked worker. The daemon is single-threaded, so its thread is the process.
        set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != daemon_pid:
            os._exit(1)  # the daemon died before the signal was armed
        return original(sock, authenticated)

    pyspark_daemon.worker = worker  # manager() looks the name up at every fork
    pyspark_daemon.manager()


if __name__ == "__main__":
    main()
