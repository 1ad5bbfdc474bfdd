"""dev/check_layers.py: the layer rule ``make lint`` enforces, on small made-up packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_layers", ROOT / "dev" / "check_layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


check_layers = _load()


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package named ``daemon`` (so the real layer table applies) with these modules."""
    root = tmp_path / "daemon"
    for name, source in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root and not (path.parent / "__init__.py").exists():
            (path.parent / "__init__.py").write_text("")
        path.write_text(source)
    return root


def test_a_package_that_keeps_the_layers_passes(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "structs.py": "",
            "errors.py": "from daemon.structs import X\n",
            "config/worker.py": "from daemon.errors import E\n",
            "storage/log.py": "from daemon.structs import TopicPartition\n",
            "kafka/coordinator.py": "from daemon.errors import E\n",
            "cluster/member.py": "from daemon.kafka import coordinator\n",
            "connectors/api.py": "from daemon.config.worker import W\n",
            "runtime/task.py": "from daemon.connectors import api\nfrom . import model\n",
            "runtime/model.py": "",
            "cli.py": "def main():\n    from daemon.runtime.incarnation.incarnation import run\n",
        },
    )
    assert check_layers.check(root) == []


def test_an_import_of_a_higher_layer_is_reported_with_its_line(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "storage/standalone.py": "import os\n\nfrom daemon.runtime.model import TargetState\n",
            "runtime/model.py": "",
        },
    )
    assert check_layers.check(root) == [
        "daemon/storage/standalone.py:3: daemon.storage.standalone imports daemon.runtime.model,"
        " a higher layer"
    ]


@pytest.mark.parametrize(
    "source",
    [
        "def f():\n    from daemon.connectors import records\n",  # function-local
        "import typing\nif typing.TYPE_CHECKING:\n    import daemon.connectors.records\n",
        "from ..connectors import records\n",  # relative
        "import importlib\nimportlib.import_module('daemon.connectors.records')\n",  # by name
        "def f():\n    __import__('daemon.connectors.records')\n",
    ],
)
def test_every_kind_of_import_counts(tmp_path: Path, source: str) -> None:
    root = _package(tmp_path, {"storage/log.py": source, "connectors/records.py": ""})
    [problem] = check_layers.check(root)
    assert "daemon.storage.log imports daemon.connectors.records, a higher layer" in problem


def test_the_kafka_package_sits_below_config(tmp_path: Path) -> None:
    """``daemon.kafka`` (aiokafka's private state) takes aiokafka's objects from its callers:
    config, and everything above it, may use it; it may not reach up for the config."""
    root = _package(
        tmp_path,
        {
            "kafka/positions.py": "from daemon.config.worker import WorkerConfig\n",
            "config/worker.py": "",
        },
    )
    [problem] = check_layers.check(root)
    assert "daemon.kafka.positions imports daemon.config.worker, a higher layer" in problem


def test_independent_siblings_may_not_import_each_other(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {"storage/log.py": "from daemon.executor.pool import Pool\n", "executor/pool.py": ""},
    )
    [problem] = check_layers.check(root)
    assert "an independent sibling" in problem


def test_a_cycle_within_a_layer_is_reported_with_its_edges(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "config/providers.py": "from daemon.config.worker import W\n",
            "config/worker.py": "def f():\n    from daemon.config import providers\n",
        },
    )
    [problem] = check_layers.check(root)
    assert problem.startswith("import cycle among daemon.config.providers, daemon.config.worker")
    assert "daemon/config/providers.py:1" in problem and "daemon/config/worker.py:2" in problem


def test_a_module_outside_the_table_is_reported(tmp_path: Path) -> None:
    root = _package(tmp_path, {"newthing.py": "from daemon.errors import E\n", "errors.py": ""})
    [problem] = check_layers.check(root)
    assert "daemon.newthing is in no layer" in problem


def test_the_package_root_is_at_the_bottom_but_not_what_lies_below_it(tmp_path: Path) -> None:
    assert check_layers.layer_of("daemon") == (0, 0)
    assert check_layers.layer_of("daemon.cli") == (len(check_layers.LAYERS) - 1, 0)
    assert check_layers.layer_of("daemonic") is None


def test_main_exits_1_and_names_each_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _package(tmp_path, {"errors.py": "from daemon.config.problems import P\n"})
    (root / "config").mkdir()
    (root / "config" / "__init__.py").write_text("")
    (root / "config" / "problems.py").write_text("from daemon.errors import InvalidConfig\n")
    assert check_layers.main([str(root)]) == 1
    out = capsys.readouterr().out
    assert "daemon.errors imports daemon.config.problems, a higher layer" in out
    assert "import cycle among daemon.config.problems, daemon.errors" in out


def test_connectd_itself_keeps_the_layers() -> None:
    assert check_layers.check(ROOT / "daemon") == []
