"""Key and trust stores in the three formats Kafka and Connect take (``ssl.keystore.type`` /
``ssl.truststore.type``: PEM, PKCS12, JKS), loaded into a Python ``ssl.SSLContext``.

Python's ``ssl`` reads PEM only. A PKCS12 store is read with ``cryptography``; a JKS store, a
Java format no Python library of the project reads, is first converted to PKCS12 by the JDK's
own ``keytool`` (``-importkeystore``, into a private temporary directory that is removed at
once) — connectd needs a JDK anyway for Spark. What comes out is held in memory: a trust
store's certificates go to ``load_verify_locations(cadata=...)``; a key store's key and chain
are written, the key encrypted with a one-time password, to a private temporary file that
``load_cert_chain`` reads and that is removed right after.

Passwords as in Kafka: ``ssl.keystore.password`` opens a PKCS12 or JKS key store,
``ssl.key.password`` its key when that differs (JKS; a PEM key's own encryption); a trust
store's password may be left out (JKS and PKCS12 certificates are read without it where the
format allows). Every failure is a ``ConfigError`` naming the setting prefix, the file and what
was wrong; blocking (files, keytool): call at start-up, never on the event loop.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import ssl
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.errors import ConfigError
from daemon.tlsprotocols import DEFAULTS, TlsProtocols

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

TYPES = ("PEM", "PKCS12", "JKS")
KEYTOOL_TIMEOUT = 60.0


class StoreError(ConfigError):
    """A key or trust store that cannot be read as configured."""


@dataclass(frozen=True)
class Store:
    """One configured store: ``prefix`` names its settings in messages (``ssl.keystore``,
    ``listeners.https.ssl.truststore``...)."""

    prefix: str
    location: Path
    type: str = "PEM"
    password: str | None = None
    key_password: str | None = None  # key stores only


def configured(
    prefix: str,
    location: Path | None,
    kind: str | None,
    password: str | None,
    key_password: str | None,
) -> Store | None:
    """The store settings ``prefix.*`` name, or None without a location. ``kind``: the
    ``*.type`` setting if it was set; unset, Kafka's default (JKS), unless the file is PEM
    text: connectd read PEM only before, and its configurations left the type out. Blocking
    (reads the file's first bytes)."""
    if location is None:
        return None
    explicit = kind is not None
    if kind is None:
        kind = "PEM" if _looks_pem(location) else "JKS"
    if kind == "PEM" and password and explicit:
        # Kafka's DefaultSslEngineFactory refuses the same: a PEM file has no store password.
        # (A PEM file found by its text, the type unset, keeps the password connectd ignored
        # there before: Kafka would have read the file as JKS and failed anyway.)
        if prefix.endswith("keystore"):
            why = f"only its key's password may be, {prefix[: -len('keystore')]}key.password"
        else:
            why = "a PEM file of certificates has no password"
        raise StoreError(f"{prefix}.password cannot be given for a PEM file ({location}): {why}")
    return Store(prefix, location, kind, password, key_password)


def _looks_pem(location: Path) -> bool:
    try:
        with location.open("rb") as f:
            return b"-----BEGIN" in f.read(4096)
    except OSError:
        return False


def load_truststore(ctx: ssl.SSLContext, store: Store) -> None:
    """Trust the certificates of ``store`` in ``ctx``."""
    if store.type == "PEM":
        _ssl_call(store, ctx.load_verify_locations, cafile=str(store.location))
        return
    _, _, certs = _pkcs12_parts(store)
    if not certs:
        raise StoreError(
            f"{store.prefix}.location: {store.location} ({store.type}) holds no certificate to"
            " trust"
        )
    _ssl_call(store, ctx.load_verify_locations, cadata="".join(_pem(c) for c in certs))


def load_keystore(ctx: ssl.SSLContext, store: Store) -> None:
    """Present the key and certificate chain of ``store`` from ``ctx``."""
    if store.type == "PEM":
        password = store.key_password
        _ssl_call(store, ctx.load_cert_chain, str(store.location), password=password)
        return
    key, cert, chain = _pkcs12_parts(store)
    if key is None or cert is None:
        raise StoreError(
            f"{store.prefix}.location: {store.location} ({store.type}) holds no private key"
            " with its certificate: a key store needs one (a store of certificates alone is a"
            " trust store)"
        )
    from cryptography.hazmat.primitives import serialization

    one_time = secrets.token_urlsafe(24)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode()),
    )
    with _private_dir() as directory:
        path = directory / "chain.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(encrypted)
            out.write("".join(_pem(c) for c in [cert, *chain]).encode())
        _ssl_call(store, ctx.load_cert_chain, str(path), password=one_time)


# -- reading PKCS12 and JKS ----------------------------------------------------------------


def _pkcs12_parts(
    store: Store,
) -> tuple[PrivateKeyTypes | None, x509.Certificate | None, list[x509.Certificate]]:
    """``(key, certificate, other certificates)`` of a PKCS12 or JKS store."""
    if store.type not in TYPES:
        raise StoreError(f"{store.prefix}.type: {store.type!r} is not one of {', '.join(TYPES)}")
    try:
        data = store.location.read_bytes()
    except OSError as exc:
        raise StoreError(f"{store.prefix}.location: cannot read {store.location}: {exc}") from exc
    if store.type == "JKS":
        data = _jks_to_pkcs12(store)
    from cryptography.hazmat.primitives.serialization import pkcs12

    password = store.password.encode() if store.password else None
    try:
        parsed = pkcs12.load_pkcs12(data, password)
    except ValueError as exc:
        hint = (
            f"is {store.prefix}.password right?"
            if store.password
            else f"set {store.prefix}.password"
        )
        raise StoreError(
            f"{store.prefix}.location: {store.location} cannot be read as {store.type} ({exc});"
            f" {hint}"
        ) from exc
    cert = parsed.cert.certificate if parsed.cert is not None else None
    others = [c.certificate for c in parsed.additional_certs]
    return parsed.key, cert, others


def _jks_to_pkcs12(store: Store) -> bytes:
    """The JKS store as PKCS12 bytes, converted by the JDK's keytool under the store's password
    (a key whose own password differs, ``key_password``, is converted alias by alias)."""
    keytool = _keytool()
    if not store.password:
        raise StoreError(
            f"{store.prefix}.password is needed to read the JKS store {store.location}"
            " (keytool converts it to PKCS12 under that password)"
        )
    with _private_dir() as directory:
        target = directory / "store.p12"
        base = [
            keytool,
            "-importkeystore",
            "-noprompt",
            "-srckeystore",
            str(store.location),
            "-srcstoretype",
            "JKS",
            "-srcstorepass:env",
            "CONNECTD_SRC_PASS",
            "-destkeystore",
            str(target),
            "-deststoretype",
            "PKCS12",
            "-deststorepass:env",
            "CONNECTD_DEST_PASS",
        ]
        env = {
            **os.environ,
            "CONNECTD_SRC_PASS": store.password,
            "CONNECTD_DEST_PASS": store.password,
        }
        if store.key_password and store.key_password != store.password:
            env["CONNECTD_KEY_PASS"] = store.key_password
            for alias in _key_aliases(keytool, store, env):
                _keytool_run(
                    store,
                    [*base, "-srcalias", alias, "-srckeypass:env", "CONNECTD_KEY_PASS"],
                    env,
                )
        else:
            _keytool_run(store, base, env)
        return target.read_bytes()


def _key_aliases(keytool: str, store: Store, env: dict[str, str]) -> list[str]:
    listing = _keytool_run(
        store,
        [
            keytool,
            "-list",
            "-keystore",
            str(store.location),
            "-storetype",
            "JKS",
            "-storepass:env",
            "CONNECTD_SRC_PASS",
        ],
        env,
    )
    return re.findall(r"^([^,\n]+), [^\n]*, PrivateKeyEntry,", listing, re.MULTILINE)


def _keytool_run(store: Store, argv: list[str], env: dict[str, str]) -> str:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=KEYTOOL_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StoreError(f"{store.prefix}.location: keytool could not run: {exc}") from exc
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip().splitlines()
        why = next((line for line in said if "keytool error" in line), said[-1] if said else "?")
        raise StoreError(
            f"{store.prefix}.location: {store.location} cannot be read as JKS ({why.strip()});"
            f" check {store.prefix}.password"
        )
    return done.stdout


def _keytool() -> str:
    home = os.environ.get("JAVA_HOME")
    candidates = [Path(home) / "bin" / "keytool"] if home else []
    found = shutil.which("keytool")
    if found:
        candidates.append(Path(found))
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise StoreError(
        "a JKS store is read through the JDK's keytool, found neither in JAVA_HOME nor on PATH:"
        " install a JDK (apt-get install openjdk-17-jdk-headless) or convert the store to"
        " PKCS12 (keytool -importkeystore -deststoretype PKCS12)"
    )


# -- helpers -------------------------------------------------------------------------------


def _pem(cert: x509.Certificate) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding

    return cert.public_bytes(Encoding.PEM).decode()


@contextlib.contextmanager
def _private_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="connectd-tls-"))  # mode 0700
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _ssl_call(store: Store, method: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    try:
        method(*args, **kwargs)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise StoreError(
            f"{store.prefix}.location: {store.location} ({store.type}) cannot be loaded: {exc}"
        ) from exc


# -- contexts ------------------------------------------------------------------------------

_CLIENT_CONTEXTS: dict[tuple[object, ...], ssl.SSLContext] = {}


def client_context(
    keystore: Store | None,
    truststore: Store | None,
    check_hostname: bool,
    protocols: TlsProtocols = DEFAULTS,
) -> ssl.SSLContext:
    """A client ``SSLContext`` (Kafka's clients): ``truststore``'s certificates, or the system's
    without one; ``keystore``'s key and chain for mutual TLS; the versions and suites
    ``protocols`` allows. Built once per process for the same settings and files (a JKS store
    costs a keytool run), again when a file changes (its size or modification time): a rotated
    store is read by the next client that starts."""
    key = (keystore, truststore, check_hostname, protocols, _stamp(keystore), _stamp(truststore))
    ctx = _CLIENT_CONTEXTS.get(key)
    if ctx is None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        protocols.apply(ctx)
        ctx.check_hostname = check_hostname
        if not check_hostname:
            ctx.verify_mode = ssl.CERT_REQUIRED  # the certificate is still checked
        if truststore is not None:
            load_truststore(ctx, truststore)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if keystore is not None:
            load_keystore(ctx, keystore)
        if len(_CLIENT_CONTEXTS) >= 16:  # configurations come and go with reloads
            _CLIENT_CONTEXTS.clear()
        _CLIENT_CONTEXTS[key] = ctx
    return ctx


def _stamp(store: Store | None) -> tuple[int, int] | None:
    if store is None:
        return None
    try:
        st = store.location.stat()
    except OSError:
        return None  # loading it says what is wrong
    return st.st_mtime_ns, st.st_size
