"""Prometheus for tests: ``samples`` reads a ``/metrics`` scrape; a real Prometheus (Debian's
package, unpacked by ``make prometheus`` into ``.cache/prometheus``) runs on loopback with a
configuration of the test's, tracked by PID and ended by PID (``prometheus`` fixture)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.daemon import ROOT
from support.kafka import free_port

BIN = ROOT / ".cache" / "prometheus" / "usr" / "bin"

#: Sample name → [(labels, value)].
Samples = dict[str, list[tuple[dict[str, str], float]]]


def samples(text: str) -> Samples:
    """Sample name → [(labels, value)] of a Prometheus text exposition."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def tool(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make prometheus` (make test does)")
    return path


class Prometheus:
    """One Prometheus server; ``query`` and ``alerts`` read its HTTP API."""

    def __init__(
        self,
        workdir: Path,
        targets: Sequence[str],
        rules: Sequence[Path],
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(r) for r in rules],
            "scrape_configs": [
                {
                    "job_name": "connectd",
                    "static_configs": [{"targets": list(targets), "labels": dict(labels or {})}],
                }
            ],
        }
        cfg = workdir / "prometheus.yml"
        cfg.write_text(json.dumps(config))  # JSON is YAML
        self.log_path = workdir / "prometheus.log"
        args = [
            str(tool("prometheus")),
            f"--config.file={cfg}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=5) as r:
            return json.loads(r.read())

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{self.log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query", query=expr)["data"]["result"]
        return result

    def alerts(self, state: str = "firing") -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.get("/api/v1/alerts")["data"]["alerts"]
        return [a for a in found if a["state"] == state]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Any]:
    """Factory: ``prometheus(targets, rules)`` → a started ``Prometheus`` (ready), ended (by
    its PID) when the test ends."""
    made: list[Prometheus] = []

    def start(
        targets: Sequence[str],
        rules: Sequence[Path] = (),
        labels: Mapping[str, str] | None = None,
    ) -> Prometheus:
        p = Prometheus(tmp_path / f"prometheus-{len(made)}", targets, rules, labels)
        made.append(p)
        deadline = time.monotonic() + 60
        while not p.ready():
            assert time.monotonic() < deadline, "prometheus not ready within 60 s"
            time.sleep(0.1)
        return p

    yield start
    for p in made:
        p.stop()
