"""Kafka's TLS protocol settings translated for OpenSSL (``daemon.tlsprotocols``), and how a
worker file's ``ssl.*`` keys are taken, ignored or refused."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from daemon.config.parse import parse_worker
from daemon.errors import ConfigError, InvalidConfig
from daemon.rest.settings import RestSettings
from daemon.tlsprotocols import TLS12_SUITES, TLS13_SUITES, TlsSettingError, parse


def test_kafkas_defaults_are_tls_12_and_13_with_openssls_suites() -> None:
    p = parse("ssl")
    assert (p.versions, p.ciphers) == (("TLSv1.2", "TLSv1.3"), None)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    p.apply(ctx)
    assert (ctx.minimum_version, ctx.maximum_version) == (
        ssl.TLSVersion.TLSv1_2,
        ssl.TLSVersion.TLSv1_3,
    )


def test_protocol_tls12_caps_a_client_but_not_a_server() -> None:
    assert parse("ssl", "TLSv1.2").versions == ("TLSv1.2",)
    assert parse("listeners.https.ssl", "TLSv1.2", client=False).versions == (
        "TLSv1.2",
        "TLSv1.3",
    )
    assert parse("ssl", "TLS").versions == ("TLSv1.2", "TLSv1.3")


def test_versions_java_17_disables_are_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert parse("ssl", enabled=["TLSv1.2", "TLSv1.1", "TLSv1"]).versions == ("TLSv1.2",)
    assert "ssl.enabled.protocols: TLSv1.1 is left out" in caplog.text
    with pytest.raises(TlsSettingError, match="no TLS version is left"):
        parse("ssl", enabled=["TLSv1.1"])


def test_suites_by_iana_name_become_openssls_and_turn_off_a_version_without_any() -> None:
    p = parse("ssl", cipher_suites=["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"])
    assert (p.versions, p.ciphers) == (("TLSv1.2",), "ECDHE-RSA-AES128-GCM-SHA256")
    p = parse("ssl", cipher_suites=sorted(TLS13_SUITES))
    assert p.versions == ("TLSv1.3",)
    both = parse("ssl", cipher_suites=[*sorted(TLS13_SUITES), "TLS_RSA_WITH_AES_128_GCM_SHA256"])
    assert (both.versions, both.ciphers) == (("TLSv1.2", "TLSv1.3"), "AES128-GCM-SHA256")


@pytest.mark.parametrize(
    ("kwargs", "key", "words"),
    [
        ({"protocol": "SSLv3"}, "ssl.protocol", "not a TLS protocol"),
        ({"protocol": "TLSv1.1"}, "ssl.protocol", "disabled by OpenSSL 3"),
        ({"enabled": ["TLSv1.4"]}, "ssl.enabled.protocols", "expected a list of TLSv1.2"),
        ({"protocol": "TLSv1.2", "enabled": ["TLSv1.3"]}, "ssl.enabled.protocols", "no TLS"),
        ({"cipher_suites": ["TLS_AES_128_GCM_SHA256"]}, "ssl.cipher.suites", "cannot narrow"),
        ({"cipher_suites": ["ECDHE-RSA-AES128-GCM-SHA256"]}, "ssl.cipher.suites", "IANA names"),
        (
            {"enabled": ["TLSv1.3"], "cipher_suites": ["TLS_RSA_WITH_AES_128_GCM_SHA256"]},
            "ssl.enabled.protocols",
            "and ssl.cipher.suites no TLS version",
        ),
    ],
)
def test_what_cannot_be_honoured_names_its_key(kwargs: dict, key: str, words: str) -> None:
    with pytest.raises(TlsSettingError) as raised:
        parse("ssl", **kwargs)
    assert raised.value.key == key and words in raised.value.reason


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl command")
def test_the_suite_table_is_openssls_own() -> None:
    listing = subprocess.run(
        ["openssl", "ciphers", "-stdname", "-s", "-tls1_2", "DEFAULT"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    pairs = dict(line.split()[0:3:2] for line in listing.splitlines() if " - " in line)
    tls12 = {k: v for k, v in pairs.items() if k not in TLS13_SUITES}
    assert tls12 == TLS12_SUITES
    # The TLS 1.3 suites Python's OpenSSL enables, which it cannot narrow.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    assert {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.3"} == TLS13_SUITES
    for name in TLS12_SUITES.values():  # each alone is a cipher string OpenSSL takes
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).set_ciphers(name)


def _worker_errors(values: dict[str, str]) -> str:
    with pytest.raises(InvalidConfig) as raised:
        parse_worker({"bootstrap.servers": "127.0.0.1:9092", **values})
    return str(raised.value)


@pytest.mark.parametrize("prefix", ["ssl.", "listeners.https.ssl."])
def test_a_worker_files_ssl_keys_are_taken_ignored_or_refused(prefix: str) -> None:
    _, warnings = parse_worker(
        {"bootstrap.servers": "127.0.0.1:9092", f"{prefix}keymanager.algorithm": "SunX509"}
    )
    assert [w.key for w in warnings] == [f"{prefix}keymanager.algorithm"]
    said = _worker_errors({f"{prefix}engine.factory.class": "com.example.Factory"})
    assert f"{prefix}engine.factory.class" in said and "cannot load it" in said
    said = _worker_errors({f"{prefix}keystore.key": "-----BEGIN PRIVATE KEY-----"})
    assert f"set {prefix}keystore.location" in said
    said = _worker_errors({f"{prefix}enabled.protocol": "TLSv1.2"})  # a typo: unknown
    assert f"did you mean '{prefix}enabled.protocols'?" in said


def test_a_worker_files_bad_protocol_settings_are_errors_naming_them() -> None:
    said = _worker_errors({"ssl.enabled.protocols": "SSLv3", "ssl.cipher.suites": "RC4"})
    assert "ssl.enabled.protocols: 'SSLv3' is not a TLS version" in said
    said = _worker_errors({"ssl.cipher.suites": "RC4"})
    assert "ssl.cipher.suites: RC4 not offered" in said


def test_the_rest_listener_takes_the_workers_ssl_settings_when_it_has_none(
    tmp_path: Path,
) -> None:
    """Connect's all-or-nothing rule for ``listeners.https.*``."""
    keystore = tmp_path / "rest.pem"
    keystore.write_text("-----BEGIN PRIVATE KEY-----\n")
    base = {"bootstrap.servers": "127.0.0.1:9092", "listeners": "https://127.0.0.1:8443"}
    config, _ = parse_worker(
        {
            **base,
            "ssl.keystore.location": str(keystore),
            "ssl.client.auth": "requested",
            "ssl.enabled.protocols": "TLSv1.3",
        }
    )
    tls = RestSettings.from_worker_config(config).tls
    assert tls is not None and tls.prefix == "ssl" and tls.keystore_location == keystore
    assert (tls.client_auth, tls.protocols.versions) == ("requested", ("TLSv1.3",))
    config, _ = parse_worker(
        {
            **base,
            "ssl.keystore.location": str(keystore),
            "listeners.https.ssl.client.auth": "none",  # one listeners.https.* key: all of them
        }
    )
    settings = RestSettings.from_worker_config(config)
    assert settings.tls is None
    with pytest.raises(ConfigError, match=r"listeners\.https\.ssl\.keystore\.location"):
        settings.check()


def test_an_empty_protocol_list_is_kafkas_defaults() -> None:
    assert parse("ssl", enabled=[]).versions == ("TLSv1.2", "TLSv1.3")
    assert parse("ssl", enabled=[" "], cipher_suites=[]).versions == ("TLSv1.2", "TLSv1.3")
    config, warnings = parse_worker(
        {
            "bootstrap.servers": "127.0.0.1:9092",
            "ssl.enabled.protocols": "",
            "ssl.cipher.suites": "",
        }
    )
    assert config.tls_protocols().versions == ("TLSv1.2", "TLSv1.3") and warnings == []


def test_broker_tls_keys_and_the_rest_clients_check_are_ignored_with_a_warning() -> None:
    keys = [
        "ssl.principal.mapping.rules",
        "ssl.allow.dn.changes",
        "listeners.https.ssl.endpoint.identification.algorithm",
    ]
    _, warnings = parse_worker({"bootstrap.servers": "127.0.0.1:9092", **dict.fromkeys(keys, "")})
    assert sorted(w.key for w in warnings) == sorted(keys)


def test_no_rest_tls_without_an_https_listener(tmp_path: Path) -> None:
    """The worker's ssl.* serve the Kafka clients; with http listeners only, no REST TLS is
    built from them (no key store read at the REST server's start)."""
    config, _ = parse_worker(
        {
            "bootstrap.servers": "127.0.0.1:9092",
            "security.protocol": "SSL",
            "ssl.keystore.location": str(tmp_path / "kafka-client.jks"),
            "ssl.client.auth": "required",
        }
    )
    assert RestSettings.from_worker_config(config).tls is None
