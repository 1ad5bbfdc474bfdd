"""Kafka's TLS protocol settings (``ssl.protocol``, ``ssl.enabled.protocols``,
``ssl.cipher.suites``) on a Python ``ssl.SSLContext``.

Java names what Python's ``ssl`` (OpenSSL 3) configures differently, so each setting is
translated, and what cannot be translated is refused with why:

- **Protocols.** OpenSSL here offers TLSv1.2 and TLSv1.3, as the JDK 17 does by default (it
  disables TLSv1 and TLSv1.1 in ``jdk.tls.disabledAlgorithms``): those two in
  ``ssl.enabled.protocols`` are left out with a warning, ``SSLv3``/``SSLv2Hello`` are refused.
  The enabled versions become ``minimum_version``/``maximum_version``. On a client,
  ``ssl.protocol=TLSv1.2`` keeps TLSv1.3 off whatever the list says (Kafka's documented meaning
  of that setting); ``TLSv1.3`` and ``TLS`` put no cap.
- **Cipher suites.** Java's names are the IANA ones; OpenSSL's differ for TLS 1.2
  (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`` is ``ECDHE-RSA-AES128-GCM-SHA256``), so a fixed
  table (``openssl ciphers -stdname -tls1_2 DEFAULT`` of OpenSSL 3.0) maps them for
  ``set_ciphers``. Python's ``ssl`` cannot narrow TLS 1.3's suites (no ``set_ciphersuites``):
  a list naming all three TLS 1.3 suites OpenSSL enables is honoured, one naming none turns
  TLSv1.3 off (as in Java, where a version without a suite cannot be negotiated), one naming
  some is refused. A list without TLS 1.2 suites likewise turns TLSv1.2 off.

Every failure is a ``TlsSettingError`` (a ``ConfigError``) naming ``prefix`` + the setting.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

from daemon.errors import ConfigError

log = logging.getLogger("connectd.tls")

#: Kafka's defaults (Java 11 or newer).
DEFAULT_PROTOCOL = "TLSv1.3"
DEFAULT_ENABLED = ("TLSv1.2", "TLSv1.3")

_WARNED: set[tuple[str, str]] = set()
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_OFF_IN_JAVA = ("TLSv1", "TLSv1.1")  # disabled by the JDK 17's own defaults as well
_CONTEXT_PROTOCOLS = ("TLS", "TLSv1.2", "TLSv1.3", *_OFF_IN_JAVA)

#: TLS 1.3's suites that OpenSSL 3 enables (and that Python cannot narrow).
TLS13_SUITES = frozenset(
    {"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"}
)

#: IANA (Java) name → OpenSSL name of every TLS 1.2 suite OpenSSL 3.0 offers by default
#: (``openssl ciphers -stdname -s -tls1_2 DEFAULT``; a unit test compares with the machine's).
TLS12_SUITES: dict[str, str] = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}


class TlsSettingError(ConfigError):
    """A TLS protocol setting connectd cannot honour: ``key`` names it, ``reason`` says why."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


@dataclass(frozen=True)
class TlsProtocols:
    """The versions and suites one TLS endpoint may use, already checked (``parse``)."""

    versions: tuple[str, ...] = DEFAULT_ENABLED
    ciphers: str | None = None  # OpenSSL's cipher string for TLS 1.2; None: its defaults

    def apply(self, ctx: ssl.SSLContext) -> None:
        """Restrict ``ctx`` to these versions and suites."""
        ctx.minimum_version = _VERSIONS[self.versions[0]]
        ctx.maximum_version = _VERSIONS[self.versions[-1]]
        if self.ciphers is not None:
            ctx.set_ciphers(self.ciphers)


#: Kafka's defaults: TLSv1.2 and TLSv1.3 with OpenSSL's suites.
DEFAULTS = TlsProtocols()


def parse(
    prefix: str,
    protocol: str | None = None,
    enabled: Iterable[str] | None = None,
    cipher_suites: Iterable[str] | None = None,
    *,
    client: bool = True,
) -> TlsProtocols:
    """The endpoint ``prefix.protocol``, ``prefix.enabled.protocols`` and
    ``prefix.cipher.suites`` describe (unset: Kafka's defaults). ``client``: whether
    ``protocol`` caps the version (Kafka clients) or only names the context (servers)."""
    protocol = (protocol or DEFAULT_PROTOCOL).strip()
    if protocol not in _CONTEXT_PROTOCOLS:
        raise TlsSettingError(
            f"{prefix}.protocol",
            f"{protocol!r} is not a TLS protocol connectd offers; expected"
            " TLSv1.3 (Kafka's default), TLSv1.2 or TLS",
        )
    if protocol in _OFF_IN_JAVA:
        raise TlsSettingError(
            f"{prefix}.protocol",
            f"{protocol} is disabled by OpenSSL 3 (and by Java 17's own"
            " defaults); expected TLSv1.3 or TLSv1.2",
        )
    names = [n.strip() for n in enabled or () if n.strip()]
    if not names:  # unset or empty: Kafka's defaults (DefaultSslEngineFactory does the same)
        names = list(DEFAULT_ENABLED)
    versions: set[str] = set()
    for name in names:
        if name in _VERSIONS:
            versions.add(name)
        elif name in _OFF_IN_JAVA:
            if (prefix, name) not in _WARNED:  # once: this runs at every client's start
                _WARNED.add((prefix, name))
                log.warning(
                    "%s.enabled.protocols: %s is left out: OpenSSL 3 disables it, as Java 17 does",
                    prefix,
                    name,
                )
        else:
            raise TlsSettingError(
                f"{prefix}.enabled.protocols",
                f"{name!r} is not a TLS version connectd offers;"
                " expected a list of TLSv1.2 and TLSv1.3",
            )
    if client and protocol == "TLSv1.2":
        versions.discard("TLSv1.3")
    ciphers = None
    if cipher_suites is not None and any(s.strip() for s in cipher_suites):
        ciphers, versions = _suites(
            prefix, [s.strip() for s in cipher_suites if s.strip()], versions
        )
    if not versions:
        raise TlsSettingError(
            f"{prefix}.enabled.protocols",
            f"with {prefix}.protocol={protocol}"
            + (f" and {prefix}.cipher.suites" if ciphers is not None else "")
            + " no TLS version is left to use; expected TLSv1.2 or TLSv1.3 among them",
        )
    ordered = tuple(v for v in _VERSIONS if v in versions)
    return TlsProtocols(ordered, ciphers)


def _suites(prefix: str, suites: list[str], versions: set[str]) -> tuple[str, set[str]]:
    unknown = [s for s in suites if s not in TLS12_SUITES and s not in TLS13_SUITES]
    if unknown:
        raise TlsSettingError(
            f"{prefix}.cipher.suites",
            f"{', '.join(unknown)} not offered by connectd's TLS"
            " (OpenSSL 3 defaults); expected IANA names such as"
            " TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 or TLS_AES_128_GCM_SHA256",
        )
    tls13 = {s for s in suites if s in TLS13_SUITES}
    if tls13 and tls13 != TLS13_SUITES:
        raise TlsSettingError(
            f"{prefix}.cipher.suites",
            f"names {', '.join(sorted(tls13))} of TLS 1.3's suites;"
            " Python's ssl cannot narrow TLS 1.3 to some of them: expected all of"
            f" {', '.join(sorted(TLS13_SUITES))} or none (TLSv1.3 is then off)",
        )
    if not tls13:
        versions = versions - {"TLSv1.3"}
    tls12 = [TLS12_SUITES[s] for s in suites if s in TLS12_SUITES]
    if not tls12:
        versions = versions - {"TLSv1.2"}
    # TLS 1.3 only: any valid string will do, as OpenSSL's TLS 1.2 list is then unused.
    ciphers = ":".join(tls12) if tls12 else "DEFAULT"
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        probe.set_ciphers(ciphers)
    except ssl.SSLError as exc:
        raise TlsSettingError(f"{prefix}.cipher.suites", f"OpenSSL refuses them: {exc}") from exc
    return ciphers, versions
