"""Issue 17 item 2: where connector configs are validated for a worker, a local table path with
a cluster master is refused unless the worker says local paths are shared — the registry bound
to the worker (creation, the daemon's start and reload, distributed mode), REST's
``/config/validate``, and ``check-config`` with the worker file beside the connector's.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from daemon.config import check_main
from daemon.config.placement import SparkPlacement
from daemon.config.worker_checks import WorkerChecks
from daemon.connectors.api import default_registry
from daemon.connectors.registry import (
    ConnectorRegistry,
    validate_connector,
    validate_connector_async,
)
from daemon.errors import InvalidConfig
from daemon.rest.validate import validate_async

CLUSTER = "spark://127.0.0.1:7077"
SHARED = "executor.spark.local.paths.shared"


def sink(path: str) -> dict[str, str]:
    return {"connector.class": "ParquetSink", "topics": "orders", "path": path}


def test_a_registry_bound_to_a_cluster_worker_refuses_a_local_path(tmp_path: Path) -> None:
    placed = default_registry.bound(WorkerChecks(SparkPlacement(CLUSTER)))
    table = str(tmp_path / "t")
    with pytest.raises(InvalidConfig) as caught:
        validate_connector("orders", sink(table), placed)
    (problem,) = caught.value.problems
    assert problem.key == "path" and f"executor.spark.master={CLUSTER}" in problem.message
    # The same registry accepts a URI the cluster reaches; the process's registry, a local
    # master and shared paths accept the local path.
    assert validate_connector("orders", sink("hdfs://nn:8020/t"), placed)["path"]
    assert validate_connector("orders", sink(table), default_registry)["path"] == table
    shared = default_registry.bound(WorkerChecks(SparkPlacement(CLUSTER, local_paths_shared=True)))
    assert validate_connector("orders", sink(table), shared)["path"] == table
    local = default_registry.bound(WorkerChecks(SparkPlacement("local[2]")))
    assert validate_connector("orders", sink(table), local)["path"] == table


async def test_the_async_validation_refuses_it_too(tmp_path: Path) -> None:
    placed = default_registry.bound(WorkerChecks(SparkPlacement("yarn")))
    with pytest.raises(InvalidConfig, match=r"executor\.spark\.master=yarn"):
        await validate_connector_async("orders", sink(f"file://{tmp_path}/t"), placed)


def test_a_bound_registry_shares_the_alias_table() -> None:
    base = ConnectorRegistry()
    placed = base.bound(WorkerChecks(SparkPlacement(CLUSTER)))
    base.register_alias("Parquet2", "daemon.connectors.parquet:ParquetSinkConnector")
    assert placed.resolve("Parquet2") is base.resolve("Parquet2")
    assert base.checks != placed.checks


async def test_rest_validation_files_the_error_under_path(tmp_path: Path) -> None:
    config = {"name": "orders", **sink(str(tmp_path / "t"))}
    cls = default_registry.resolve("ParquetSink")

    async def errors(placement: SparkPlacement, given: dict[str, str]) -> dict[str, list[str]]:
        infos = await validate_async(
            "ParquetSink", given, cls(), default_registry.config_def, WorkerChecks(placement)
        )
        return {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"]}

    found = await errors(SparkPlacement(CLUSTER), config)
    assert len(found["path"]) == 1 and SHARED in found["path"][0]
    assert sum(len(e) for e in found.values()) == 1
    assert (await errors(SparkPlacement(CLUSTER, True), config))["path"] == []
    uri = dict(config, path="s3a://bucket/t")
    assert (await errors(SparkPlacement(CLUSTER), uri))["path"] == []


def _check(*files: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = check_main([str(f) for f in files], out, err, resolver=default_registry.config_def)
    return code, out.getvalue() + err.getvalue()


def test_check_config_checks_connector_files_against_the_worker_file(tmp_path: Path) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(f"bootstrap.servers=127.0.0.1:9092\nexecutor.spark.master={CLUSTER}\n")
    connector = tmp_path / "orders.properties"
    connector.write_text("name=orders\nconnector.class=ParquetSink\ntopics=orders\n")
    with connector.open("a") as f:
        f.write(f"path={tmp_path / 't'}\n")
    code, out = _check(worker, connector)
    assert code == 78, out
    (line,) = [x for x in out.splitlines() if x.startswith("error: ")]
    assert line.startswith(f"error: {connector}:4: path: '{tmp_path / 't'}' is a local path")
    assert f"executor.spark.master={CLUSTER}" in line and f"{SHARED}=true" in line
    assert out.splitlines()[-1] == "FAILED: 2 files checked, 1 error(s), 0 warning(s)"
    # Either order of the files; the connector alone (no worker: a local master) passes.
    assert _check(connector, worker)[0] == 78
    assert _check(connector)[0] == 0
    with worker.open("a") as f:
        f.write(f"{SHARED}=true\n")
    assert _check(worker, connector)[0] == 0


def test_check_config_checks_a_toml_files_connectors_against_its_worker(tmp_path: Path) -> None:
    toml = tmp_path / "run.toml"
    toml.write_text(
        'mode = "standalone"\n[worker]\n"bootstrap.servers" = "127.0.0.1:9092"\n'
        f'"executor.spark.master" = "{CLUSTER}"\n'
        f'[[connectors]]\nname = "orders"\n[connectors.config]\n"connector.class" = "ParquetSink"\n'
        f'topics = "orders"\npath = "{tmp_path / "t"}"\n'
    )
    code, out = _check(toml)
    assert code == 78, out
    assert f"error: {toml}: connectors[0].config.path: '{tmp_path / 't'}' is a local path" in out


def test_a_daemon_validates_for_its_worker_at_start_and_reload(tmp_path: Path) -> None:
    from daemon.config.plan import load_plan, reread
    from daemon.daemon import Daemon

    worker = tmp_path / "worker.properties"
    worker.write_text(
        f"bootstrap.servers=127.0.0.1:9092\nstate.dir={tmp_path / 'state'}\n"
        f"executor.spark.master={CLUSTER}\n"
    )
    connector = tmp_path / "orders.properties"
    connector.write_text("name=orders\nconnector.class=EchoSink\ntopics=orders\n")
    plan = load_plan("standalone", worker=worker, connectors=[connector])
    daemon = Daemon(plan, handle_signals=False, rest=False)
    assert daemon.registry.checks == WorkerChecks(SparkPlacement(CLUSTER))
    # A reload (SIGHUP) whose connector file now names a local table is refused, located.
    connector.write_text(
        f"name=orders\nconnector.class=ParquetSink\ntopics=orders\npath={tmp_path / 't'}\n"
    )
    with pytest.raises(InvalidConfig) as caught:
        reread(plan, daemon.registry)
    (problem,) = caught.value.problems
    assert problem.file == str(connector) and problem.key == "path"
    assert f"{SHARED}=true" in problem.message + str(problem.expected)
