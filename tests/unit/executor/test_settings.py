"""Pool settings: validation, Spark defaults, worker-config keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.assembly import new_pool
from daemon.config import parse_worker
from daemon.errors import ConfigError, InvalidConfig
from daemon.executor import PoolSettings


@pytest.mark.parametrize(
    "bad",
    [
        {"size": 0},
        {"spares": -1},
        {"start_timeout": 0},
        {"heartbeat_interval": 2.0, "heartbeat_timeout": 1.0},
        {"spark_conf": {"driver.memory": "1g"}},
    ],
)
def test_invalid_settings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        PoolSettings(**bad)  # type: ignore[arg-type]


def test_session_conf_defaults_then_operator_settings() -> None:
    conf = PoolSettings(spark_conf={"spark.ui.enabled": "true", "spark.x": "y"}).session_conf()
    assert conf["spark.ui.enabled"] == "true"
    assert conf["spark.x"] == "y"
    assert conf["spark.python.daemon.module"] == "daemon.executor.pyworker"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    remote = PoolSettings(spark_master="spark://h:7077").session_conf()
    assert "spark.driver.bindAddress" not in remote
    # The cluster's nodes have no connectd to import: PySpark's own worker daemon runs there.
    assert "spark.python.daemon.module" not in remote
    assert PoolSettings(size=2, spares=1).target == 3


def test_the_worker_config_is_the_one_parser_of_executor_keys(tmp_path: Path) -> None:
    """``executor.*`` keys reach the pool only through the worker config's declarations."""
    config = parse_worker(
        {
            "executor.pool.size": "2",
            "executor.pool.spares": "0",
            "executor.spark.master": "local[2]",
            "executor.spark.conf.spark.driver.memory": "2g",
            "executor.spark.formats": "delta, iceberg",
            "executor.jars.dir": str(tmp_path),
            "executor.start.timeout.ms": "30000",
        }
    ).config
    s = new_pool(config, relay=None).settings
    assert (s.size, s.spares, s.spark_master, s.start_timeout) == (2, 0, "local[2]", 30.0)
    assert dict(s.spark_conf) == {"spark.driver.memory": "2g"}
    assert s.formats == {"delta", "iceberg"} and s.jars_dir == tmp_path
    with pytest.raises(InvalidConfig, match=r"executor\.pool\.size"):
        parse_worker({"executor.pool.size": "many"})
