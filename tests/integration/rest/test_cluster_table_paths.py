"""Issue 17 item 2: with a Spark cluster master, a ParquetSink whose ``path`` is local is refused
unless the worker sets ``executor.spark.local.paths.shared=true`` — on real processes.

- ``connectd check-config worker connector`` exits 78 naming the connector file, ``path``, the
  master and the setting; ``connectd standalone`` with those files exits 78 with the same words
  before it starts anything (no Spark master answers at that address: nothing reaches it).
- A daemon on the session's real Spark cluster: ``POST /connectors`` answers Connect's 400
  body, ``/config/validate`` files the error under ``path``, and a URI path is accepted by
  both (it is not refused at validation); a distributed worker refuses it the same way.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cluster import ClusterFactory, rest_port
from support.daemon import ROOT, ProcessFactory, worker_properties, write_properties
from support.kafka import free_port
from support.spark_cluster import SparkCluster, cluster_spark_conf

pytestmark = pytest.mark.integration

SHARED = "executor.spark.local.paths.shared"


def sink(path: str, name: str = "orders") -> dict[str, str]:
    return {"name": name, "connector.class": "ParquetSink", "topics": "orders", "path": path}


def on_cluster(bootstrap: str, state: Path, master: str, **more: str) -> dict[str, str]:
    """A test worker whose executors are drivers on ``master``: one application, no spare."""
    props = worker_properties(bootstrap, state, listeners=f"http://127.0.0.1:{rest_port(set())}")
    props |= {f"executor.spark.conf.{k}": v for k, v in cluster_spark_conf().items()}
    props |= {"executor.spark.master": master, "executor.pool.spares": "0", **more}
    return props


def check_config(*files: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'tests'}")
    return subprocess.run(
        [sys.executable, "-m", "daemon", "check-config", *map(str, files)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def says_what_to_do(text: str, master: str, path: str) -> bool:
    return (
        f"path: '{path}' is a local path" in text
        and f"executor.spark.master={master}" in text
        and f"{SHARED}=true" in text
        and "hdfs://" in text
    )


def test_check_config_and_the_standalone_cli_exit_78(
    daemon_process: ProcessFactory, kafka_bootstrap: str, tmp_path: Path
) -> None:
    master = f"spark://127.0.0.1:{free_port()}"  # no master there: nothing may reach it
    table = str(tmp_path / "tables" / "orders")
    worker = on_cluster(kafka_bootstrap, tmp_path / "state", master)
    worker_file = write_properties(tmp_path / "worker.properties", worker)
    connector = write_properties(tmp_path / "orders.properties", sink(table))

    checked = check_config(worker_file, connector)
    assert checked.returncode == 78, checked.stdout + checked.stderr
    (line,) = [x for x in checked.stdout.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: {connector}:"), line
    assert says_what_to_do(line, master, table), line

    # Accepted: a URI every node may reach; or the same worker saying local paths are shared.
    uri = write_properties(tmp_path / "uri.properties", sink("hdfs://127.0.0.1:9/t", "u"))
    assert check_config(worker_file, uri).returncode == 0
    shared = write_properties(tmp_path / "shared.properties", worker | {SHARED: "true"})
    assert check_config(shared, connector).returncode == 0

    # The daemon refuses to start, before any executor or state: exit 78, the same message.
    started = daemon_process(worker, [sink(table)], wait=False)
    with contextlib.suppress(subprocess.TimeoutExpired):
        started.wait(120)
    assert started.proc is not None and started.proc.returncode == 78, started.log()
    assert "configuration error" in started.log(), started.log()
    assert says_what_to_do(started.log(), master, table), started.log()
    assert not (tmp_path / "tables").exists()


def test_rest_refuses_a_local_path_on_a_real_cluster_and_accepts_a_uri(
    daemon_process: ProcessFactory,
    kafka_bootstrap: str,
    spark_cluster: SparkCluster,
    tmp_path: Path,
) -> None:
    master = spark_cluster.url
    daemon = daemon_process(on_cluster(kafka_bootstrap, tmp_path / "state", master))
    table = str(tmp_path / "tables" / "orders")

    code, answer = daemon.rest("POST", "/connectors", {"name": "orders", "config": sink(table)})
    assert code == 400, answer
    assert set(answer) == {"error_code", "message"} and answer["error_code"] == 400
    assert answer["message"].startswith("Connector configuration is invalid"), answer
    assert says_what_to_do(answer["message"], master, table), answer

    code, infos = daemon.rest("PUT", "/connector-plugins/ParquetSink/config/validate", sink(table))
    assert code == 200 and infos["error_count"] == 1, infos
    (path,) = [c["value"] for c in infos["configs"] if c["value"]["name"] == "path"]
    (error,) = path["errors"]
    assert says_what_to_do(f"path: {error}", master, table), error
    assert daemon.rest("GET", "/connectors") == (200, [])

    # A URI the cluster can reach passes validation and creation (STOPPED: no task runs, so
    # no write tries to reach a filesystem this test does not have).
    uri = sink("hdfs://127.0.0.1:9/tables/orders")
    code, infos = daemon.rest("PUT", "/connector-plugins/ParquetSink/config/validate", uri)
    assert code == 200 and infos["error_count"] == 0, infos
    body = {"name": "orders", "config": uri, "initial_state": "STOPPED"}
    code, answer = daemon.rest("POST", "/connectors", body)
    assert code == 201, answer
    assert daemon.rest("DELETE", "/connectors/orders")[0] == 204
    assert not (tmp_path / "tables").exists()


async def test_a_distributed_worker_refuses_it_the_same_way(
    cluster: ClusterFactory, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    master = spark_cluster.url
    conf = {
        f"executor_spark_conf_{k.replace('.', '_')}": v for k, v in cluster_spark_conf().items()
    }
    c = await cluster(1, executor_spark_master=master, executor_pool_spares="0", **conf)
    table = str(tmp_path / "tables" / "orders")
    code, answer = await c.write(
        c[0], "POST", "/connectors", {"name": "o", "config": sink(table, "o")}
    )
    assert code == 400 and answer["error_code"] == 400, answer
    assert says_what_to_do(answer["message"], master, table), answer
    code, answer = await c.write(c[0], "PUT", "/connectors/o/config", sink(table, "o"))
    assert code == 400 and says_what_to_do(answer["message"], master, table), answer
    assert c[0].rest("GET", "/connectors") == (200, [])
