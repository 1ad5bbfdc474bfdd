"""Kafka Connect's own classes for the conformance tests: connect-transforms (with connect-api,
kafka-clients), connect-runtime (its client override policies) and Jackson, resolved from Maven
Central once through tests/conformance/connect/pom.xml into
``.cache/connect-conformance-<version>-<pom hash>/libs`` (a stamp file marks it complete; a
changed pom resolves anew), and the
single-file Java programs that run records and settings through them."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from daemon.config import transforms as tf
from daemon.config.transforms import Chain
from daemon.connectors.records import RawBatch

ROOT = Path(__file__).resolve().parents[2]
CONNECT_VERSION = "4.1.2"
POM = ROOT / "tests" / "conformance" / "connect" / "pom.xml"
HARNESS = POM.with_name("Harness.java")
POLICIES = POM.with_name("Policies.java")
CONVERTERS = POM.with_name("Converters.java")
STATS = POM.with_name("Stats.java")
UNSECURED = POM.with_name("Unsecured.java")


def connect_libs(version: str = CONNECT_VERSION) -> Path:
    """The directory of Connect's jars, resolved with Maven the first time."""
    return maven_libs(
        POM,
        f"connect-conformance-{version}",
        "connect-transforms-*.jar",
        {"kafka.version": version},
    )


def maven_libs(
    pom: Path, name: str, expect: str, properties: Mapping[str, str] | None = None
) -> Path:
    """The jars of ``pom``'s dependencies, copied by Maven once into
    ``.cache/<name>-<pom hash>/libs`` (a stamp file marks it complete; a changed pom resolves
    anew); ``expect``: a glob that must match a jar there."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    libs = ROOT / ".cache" / f"{name}-{digest}" / "libs"
    if (libs / ".complete").exists():
        return libs
    libs.parent.mkdir(parents=True, exist_ok=True)
    # One resolution at a time: the suite's workers (pytest-xdist) may all get here at once,
    # and Maven copying into a directory another one is removing fails ("Failed to copy
    # artifact").
    with open(libs.parent / "resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (libs / ".complete").exists():
            return libs  # another worker resolved them meanwhile
        return _resolve(pom, name, libs, expect, properties)


def _resolve(
    pom: Path, name: str, libs: Path, expect: str, properties: Mapping[str, str] | None
) -> Path:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"mvn not found: {name} needs Maven (apt-get install maven)")
    partial = libs.with_name("libs.partial")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [mvn, "-q", "-B", "-f", str(pom)]
    cmd += [f"-D{k}={v}" for k, v in (properties or {}).items()]
    cmd += ["dependency:copy-dependencies", f"-DoutputDirectory={partial}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0 or not list(partial.glob(expect)):
        raise RuntimeError(f"could not resolve {name}: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    (partial / ".complete").write_text(f"{name}\n")
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    return libs


def _java(libs: Path, program: Path, request: str) -> Any:
    return json.loads(_run_java(libs, program, request))


def _run_java(libs: Path, program: Path, request: str) -> str:
    """What the single-file Java ``program`` prints for ``request`` on its standard input."""
    out = subprocess.run(
        ["java", "-cp", f"{libs}/*", str(program)],
        input=request,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{program.name} failed ({out.returncode}): {out.stderr[-4000:]}")
    return out.stdout


def kafka_stats(libs: Path, steps: Sequence[tuple[str, int, float]]) -> list[tuple[float, ...]]:
    """Kafka's own ``Rate``, ``Avg`` and ``Max`` of one sensor (``Stats.java``) through
    ``steps``: ``("record", ms, value)`` or ``("read", ms, 0)``; a (rate, avg, max) per read."""
    request = "".join(
        f"record {ms} {value!r}\n" if op == "record" else f"read {ms}\n" for op, ms, value in steps
    )
    printed = _run_java(libs, STATS, request)
    return [tuple(float(v) for v in line.split()) for line in printed.splitlines()]


def unsecured_logins(libs: Path, requests: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """Kafka's own unsecured OAUTHBEARER login (``Unsecured.java``) on each JAAS option map:
    ``{"token", "extensions"}`` or ``{"error"}`` per request."""
    result: list[dict[str, Any]] = _java(libs, UNSECURED, json.dumps(list(map(dict, requests))))
    return result


def refused_overrides(
    libs: Path, policies: Sequence[str], keys: Sequence[str]
) -> dict[str, dict[str, list[str]]]:
    """What each of Connect's override policies (``None``, ``Principal``, ``All``) says about
    a connector overriding the consumer settings ``keys``: key → error messages."""
    result: dict[str, dict[str, list[str]]] = _java(
        libs, POLICIES, json.dumps({"policies": list(policies), "keys": list(keys)})
    )
    return result


def run_harness(
    libs: Path,
    requests: Sequence[tuple[Mapping[str, str], Sequence[Mapping[str, Any]]]],
    converter: str = "string",
) -> list[list[dict[str, Any] | None]]:
    """For each (connector config, records): the records as Connect's classes leave them
    (``Harness.java``), None where dropped. One JVM for all of them. ``converter``: how keys
    and values are read (``string``, or ``json``: JsonConverter, schemas.enable=false)."""
    body = json.dumps(
        [{"config": dict(c), "records": list(r), "converter": converter} for c, r in requests]
    )
    result: list[list[dict[str, Any] | None]] = _java(libs, HARNESS, body)
    return result


def read_with_connect(
    libs: Path,
    requests: Sequence[tuple[str, bool, bytes | None]],
    config: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """For each (converter class, is key, bytes): what Connect's converter (configured with
    ``config``) gives a sink task (``Converters.java``): ``{"value": String.valueOf(value),
    "typed": the value with its types, "schema": its Connect schema}`` or ``{"error":
    message}``."""
    body = json.dumps(
        [
            {
                "class": cls,
                "key": is_key,
                "data": None if data is None else base64.b64encode(data).decode(),
                "config": dict(config or {}),
            }
            for cls, is_key, data in requests
        ]
    )
    result: list[dict[str, Any]] = _java(libs, CONVERTERS, body)
    return result


def chain_of(config: Mapping[str, str]) -> Chain:
    """The chain connectd makes of a connector's flat ``transforms``/``predicates`` settings,
    the harness's request form (no error allowed)."""
    chain, problems = tf.chain_from(config)
    assert not [p for p in problems if p.is_error], problems
    return chain


def harness_records(pairs: Sequence[tuple[str | None, str | None]]) -> list[dict[str, Any]]:
    """(key, value) text pairs as the harness's records: two topics, three partitions, offsets
    from 100, timestamps from 2023-11-14, no headers."""
    return [
        {
            "topic": "orders" if i % 2 else "people",
            "partition": i % 3,
            "offset": 100 + i,
            "timestamp": 1_700_000_000_000 + i,
            "key": k,
            "value": v,
            "headers": [],
        }
        for i, (k, v) in enumerate(pairs)
    ]


def raw_batch(records: Sequence[Mapping[str, Any]]) -> RawBatch:
    """The harness's records as one poll connectd converts (a missing timestamp is 0)."""
    return RawBatch(
        topics=[r["topic"] for r in records],
        partitions=[r["partition"] for r in records],
        offsets=[r["offset"] for r in records],
        timestamps=[r.get("timestamp", 0) for r in records],
        keys=[None if r["key"] is None else r["key"].encode() for r in records],
        values=[None if r["value"] is None else r["value"].encode() for r in records],
        headers=[
            tuple((k, None if v is None else v.encode()) for k, v in r["headers"]) for r in records
        ],
        timestamp_types=[0] * len(records),
    )


def one_transform(cls: str, **own: str) -> dict[str, str]:
    """A connector's settings for one transform ``t`` of class ``cls``; ``own`` its settings,
    ``_`` for ``.`` in their names (``field_syntax_version`` → ``field.syntax.version``)."""
    return {"transforms": "t", "transforms.t.type": cls} | {
        f"transforms.t.{k.replace('_', '.')}": v for k, v in own.items()
    }
