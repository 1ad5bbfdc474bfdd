"""Issue 17 item 2, unit level: a local data location is refused with a cluster master unless
the worker says local paths are shared (``daemon.config.placement``).

The connector registry, the REST validation and ``check-config`` apply it: see
tests/unit/connectors/test_placement_validation.py and
tests/integration/rest/test_cluster_table_paths.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import Mode, load_worker, parse_worker
from daemon.config.definitions import REQUIRED, ConfigDef, ConfigType, Importance
from daemon.config.placement import LOCAL, SparkPlacement, is_local

REPO = Path(__file__).resolve().parents[3]
CLUSTER = "spark://127.0.0.1:7077"

DEF = (
    ConfigDef()
    .define("path", ConfigType.STRING, REQUIRED, Importance.HIGH, "table", location=True)
    .define("other.dir", ConfigType.STRING, "", Importance.LOW, "not a location")
)


def keys(placement: SparkPlacement, path: str, **more: str) -> list[str | None]:
    return [p.key for p in placement.problems(DEF, {"path": path, **more}) if p.is_error]


@pytest.mark.parametrize("master", [CLUSTER, "yarn", "k8s://https://10.0.0.1:6443"])
@pytest.mark.parametrize("path", ["/data/t", "file:///data/t", "file:/data/t", " /data/t "])
def test_a_local_path_with_a_cluster_master_is_refused(master: str, path: str) -> None:
    (problem,) = SparkPlacement(master).problems(DEF, {"path": path})
    assert problem.is_error and problem.key == "path"
    text = str(problem)
    # What was wrong (the value, the master) and what to do (a URI, or the setting).
    assert f"'{path.strip()}' is a local path" in text
    assert f"executor.spark.master={master}" in text
    assert "executor.spark.local.paths.shared=true" in text
    assert "hdfs://" in text and "s3a://" in text


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2]", "local[4,3]"])
def test_a_local_master_refuses_nothing(master: str) -> None:
    assert keys(SparkPlacement(master), "/data/t") == []
    assert keys(LOCAL, "/data/t") == []


def test_shared_local_paths_are_accepted_with_a_cluster_master() -> None:
    assert keys(SparkPlacement(CLUSTER, local_paths_shared=True), "/mnt/shared/t") == []


@pytest.mark.parametrize("uri", ["hdfs://nn:8020/t", "s3a://bucket/t", "abfss://c@a.dfs/t"])
def test_a_uri_with_another_scheme_is_accepted(uri: str) -> None:
    assert keys(SparkPlacement(CLUSTER), uri) == []


def test_only_location_keys_are_judged_and_references_wait_for_their_value() -> None:
    cluster = SparkPlacement(CLUSTER)
    assert keys(cluster, "hdfs://nn/t", **{"other.dir": "/tmp/x"}) == []
    assert keys(cluster, "${env:TABLE_PATH}") == []  # resolved only when a task starts
    assert cluster.problems(DEF, {}) == []  # missing: the definition's own check says so
    assert cluster.problems(None, {"path": "/data/t"}) == []  # no such connector class


def test_is_local() -> None:
    assert is_local("/t") and is_local("file:///t") and is_local("FILE:/t") and is_local("C:/t")
    assert not is_local("hdfs://nn/t") and not is_local("gs://b/t")


def test_the_worker_setting_defaults_to_false_and_makes_the_placement() -> None:
    config, warnings = parse_worker({})
    assert warnings == [] and config.executor_spark_local_paths_shared is False
    assert SparkPlacement.of(config) == LOCAL
    config, _ = parse_worker(
        {"executor.spark.master": CLUSTER, "executor.spark.local.paths.shared": "true"}
    )
    assert SparkPlacement.of(config) == SparkPlacement(CLUSTER, True)


def test_the_cluster_example_worker_file_loads_clean() -> None:
    config, warnings = load_worker(REPO / "examples" / "worker-spark-cluster.properties")
    assert warnings == []
    config, warnings = load_worker(
        REPO / "examples" / "worker-spark-cluster.properties", Mode.STANDALONE
    )
    assert warnings == []
    assert config.executor_spark_master == CLUSTER  # what `make spark-up` starts
    assert config.executor_spark_local_paths_shared is True  # its workers run on this host
    conf = config.executor_spark_conf
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert {"spark.cores.max", "spark.executor.cores", "spark.executor.memory"} <= set(conf)
