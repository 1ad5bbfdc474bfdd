"""Key and trust stores made by the JDK's keytool, as an operator makes them for Kafka: a CA,
a certificate it signs for 127.0.0.1/localhost, in JKS and PKCS12 (and PEM, written from the
PKCS12 with ``cryptography``), with trust stores holding the CA.

``make_stores(directory)`` returns the paths and passwords; slow-ish (a few keytool JVMs, ~5 s):
build once per module or session.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

STORE_PASS = "store-secret"
KEY_PASS = "key-secret"  # the JKS store whose key has its own password
TRUST_PASS = "trust-secret"
CA_PASS = "ca-secret"


@dataclass(frozen=True)
class Stores:
    directory: Path
    ca_pem: Path
    #: key stores of the server certificate (CN=localhost, SAN 127.0.0.1 and localhost)
    jks: Path  # key password == store password (Kafka's usual setup)
    jks_own_key_pass: Path  # key password KEY_PASS, store password STORE_PASS
    pkcs12: Path
    pem: Path  # key + chain, unencrypted
    #: trust stores of the CA
    trust_jks: Path
    trust_pkcs12: Path


def keytool() -> str:
    found = shutil.which("keytool")
    assert found, "keytool (the JDK's) is needed: apt-get install openjdk-17-jdk-headless"
    return found


def _run(*argv: str) -> None:
    done = subprocess.run(
        [keytool(), *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def make_stores(directory: Path, name: str = "localhost") -> Stores:
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    ca, ca_pem = d / "ca.p12", d / "ca.pem"
    _run("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-dname",
         "CN=connectd-test-ca", "-ext", "bc:c", "-validity", "30", "-keystore", str(ca),
         "-storetype", "PKCS12", "-storepass", CA_PASS)  # fmt: skip
    _run("-exportcert", "-alias", "ca", "-keystore", str(ca), "-storepass", CA_PASS, "-rfc",
         "-file", str(ca_pem))  # fmt: skip

    def signed_jks(path: Path, store_pass: str, key_pass: str) -> None:
        _run("-genkeypair", "-alias", "server", "-keyalg", "RSA", "-keysize", "2048", "-dname",
             f"CN={name}", "-validity", "30", "-keystore", str(path), "-storetype", "JKS",
             "-storepass", store_pass, "-keypass", key_pass)  # fmt: skip
        csr, crt = path.with_suffix(".csr"), path.with_suffix(".crt")
        _run("-certreq", "-alias", "server", "-keystore", str(path), "-storepass", store_pass,
             "-keypass", key_pass, "-file", str(csr))  # fmt: skip
        _run("-gencert", "-alias", "ca", "-keystore", str(ca), "-storepass", CA_PASS, "-infile",
             str(csr), "-outfile", str(crt), "-ext", "SAN=dns:localhost,ip:127.0.0.1",
             "-validity", "30")  # fmt: skip
        _run("-importcert", "-alias", "ca", "-file", str(ca_pem), "-keystore", str(path),
             "-storepass", store_pass, "-noprompt")  # fmt: skip
        _run("-importcert", "-alias", "server", "-file", str(crt), "-keystore", str(path),
             "-storepass", store_pass, "-keypass", key_pass)  # fmt: skip

    jks = d / "server.jks"
    signed_jks(jks, STORE_PASS, STORE_PASS)
    own = d / "server-own-key-pass.jks"
    signed_jks(own, STORE_PASS, KEY_PASS)
    p12 = d / "server.p12"
    _run("-importkeystore", "-noprompt", "-srckeystore", str(jks), "-srcstoretype", "JKS",
         "-srcstorepass", STORE_PASS, "-srcalias", "server", "-destkeystore", str(p12),
         "-deststoretype", "PKCS12", "-deststorepass", STORE_PASS)  # fmt: skip
    pem = d / "server.pem"
    _pem_of(p12, pem)
    trust_jks, trust_p12 = d / "trust.jks", d / "trust.p12"
    for path, kind in ((trust_jks, "JKS"), (trust_p12, "PKCS12")):
        _run("-importcert", "-alias", "ca", "-file", str(ca_pem), "-keystore", str(path),
             "-storetype", kind, "-storepass", TRUST_PASS, "-noprompt")  # fmt: skip
    return Stores(d, ca_pem, jks, own, p12, pem, trust_jks, trust_p12)


def _pem_of(p12: Path, out: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    parsed = pkcs12.load_pkcs12(p12.read_bytes(), STORE_PASS.encode())
    assert parsed.key is not None and parsed.cert is not None
    key = parsed.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    chain = [parsed.cert.certificate, *(c.certificate for c in parsed.additional_certs)]
    out.write_bytes(key + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
