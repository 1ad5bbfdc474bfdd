"""Key and trust stores as Kafka takes them (PEM, PKCS12, JKS), made by the JDK's keytool, each
proven by a real TLS handshake between a server context built from a key store and a client
context built from a trust store."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from support.tls import KEY_PASS, STORE_PASS, TRUST_PASS, Stores, make_stores

from daemon.errors import ConfigError
from daemon.tlsstores import Store, StoreError, client_context, configured, load_keystore


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return make_stores(tmp_path_factory.mktemp("stores"))


def _server(keystore: Store) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_keystore(ctx, keystore)
    return ctx


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> dict[str, object]:
    """The server's certificate as the client saw it, after a full handshake on a socketpair."""
    a, b = socket.socketpair()
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            with server.wrap_socket(a, server_side=True) as s:
                s.sendall(b"ok")
        except BaseException as exc:  # the client reports it
            failure.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(b, server_hostname="localhost") as c:
            assert c.recv(2) == b"ok"
            cert = c.getpeercert()
    finally:
        thread.join(10)
    assert not failure, failure
    assert cert is not None
    return dict(cert)


@pytest.mark.parametrize("key_kind", ["JKS", "PKCS12", "PEM"])
@pytest.mark.parametrize("trust_kind", ["JKS", "PKCS12", "PEM"])
def test_every_key_store_serves_and_every_trust_store_verifies(
    stores: Stores, key_kind: str, trust_kind: str
) -> None:
    key_path = {"JKS": stores.jks, "PKCS12": stores.pkcs12, "PEM": stores.pem}[key_kind]
    trust_path = {"JKS": stores.trust_jks, "PKCS12": stores.trust_pkcs12, "PEM": stores.ca_pem}
    keystore = Store("ssl.keystore", key_path, key_kind, STORE_PASS)
    truststore = Store("ssl.truststore", trust_path[trust_kind], trust_kind, TRUST_PASS)
    cert = _handshake(_server(keystore), client_context(None, truststore, check_hostname=True))
    assert (("commonName", "localhost"),) in cert["subject"]  # type: ignore[operator]


def test_a_jks_key_with_its_own_password(stores: Stores) -> None:
    keystore = Store("ssl.keystore", stores.jks_own_key_pass, "JKS", STORE_PASS, KEY_PASS)
    truststore = Store("ssl.truststore", stores.ca_pem, "PEM")
    _handshake(_server(keystore), client_context(None, truststore, check_hostname=True))


def test_a_server_of_another_ca_is_refused(stores: Stores, tmp_path: Path) -> None:
    other = make_stores(tmp_path / "other")
    keystore = Store("ssl.keystore", other.pkcs12, "PKCS12", STORE_PASS)
    truststore = Store("ssl.truststore", stores.trust_pkcs12, "PKCS12", TRUST_PASS)
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(_server(keystore), client_context(None, truststore, check_hostname=True))


@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_a_wrong_password_names_the_setting(stores: Stores, kind: str) -> None:
    path = stores.jks if kind == "JKS" else stores.pkcs12
    with pytest.raises(StoreError) as info:
        _server(Store("ssl.keystore", path, kind, "not-the-password"))
    assert isinstance(info.value, ConfigError)  # exit 78 at start
    message = str(info.value)
    assert message.startswith(f"ssl.keystore.location: {path}")
    assert "ssl.keystore.password" in message


def test_a_store_of_certificates_alone_is_no_key_store(stores: Stores) -> None:
    with pytest.raises(StoreError, match="holds no private key"):
        _server(Store("ssl.keystore", stores.trust_pkcs12, "PKCS12", TRUST_PASS))


def test_a_jks_store_needs_its_password(stores: Stores) -> None:
    with pytest.raises(StoreError, match=r"ssl.truststore.password is needed"):
        client_context(None, Store("ssl.truststore", stores.trust_jks, "JKS"), True)


def test_an_unset_type_is_kafkas_jks_unless_the_file_is_pem(stores: Stores) -> None:
    jks = configured("ssl.keystore", stores.jks, None, STORE_PASS, None)
    pem = configured("ssl.keystore", stores.pem, None, None, None)
    named = configured("ssl.keystore", stores.pem, "PKCS12", None, None)
    assert jks is not None and pem is not None and named is not None
    assert (jks.type, pem.type, named.type) == ("JKS", "PEM", "PKCS12")
    assert configured("ssl.keystore", None, "JKS", None, None) is None


def test_the_client_context_is_built_once_per_store_and_again_when_the_file_changes(
    stores: Stores, tmp_path: Path
) -> None:
    trust = tmp_path / "trust.p12"
    trust.write_bytes(stores.trust_pkcs12.read_bytes())
    store = Store("ssl.truststore", trust, "PKCS12", TRUST_PASS)
    first = client_context(None, store, True)
    assert client_context(None, store, True) is first
    trust.write_bytes(stores.trust_pkcs12.read_bytes() + b"")  # same bytes, new mtime
    import os

    os.utime(trust, ns=(1, 1))
    assert client_context(None, store, True) is not first


def test_a_pem_file_with_a_store_password_is_refused_as_kafka_does(stores: Stores) -> None:
    """Kafka's DefaultSslEngineFactory refuses a store password for a PEM file too; a PEM file
    found by its text (the type unset) keeps the password connectd ignored there before."""
    with pytest.raises(StoreError, match=r"ssl\.keystore\.password cannot be given.*key\.password"):
        configured("ssl.keystore", stores.pem, "PEM", STORE_PASS, None)
    with pytest.raises(StoreError, match=r"ssl\.truststore\.password cannot be given"):
        configured("ssl.truststore", stores.ca_pem, "PEM", TRUST_PASS, None)
    assert configured("ssl.keystore", stores.pem, "PEM", None, None) is not None
    sniffed = configured("ssl.keystore", stores.pem, None, STORE_PASS, None)
    assert sniffed is not None and sniffed.type == "PEM"
