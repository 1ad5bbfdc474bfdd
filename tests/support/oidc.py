"""A real OpenID Connect provider on loopback for the SASL/OAUTHBEARER tests.

NAV's mock-oauth2-server 2.1.10 (MIT; ``no.nav.security:mock-oauth2-server`` on Maven Central,
resolved with its dependencies through tests/support/oidc/pom.xml into .cache/): a standalone
OAuth 2 / OIDC issuer that answers the client credentials grant with RS256-signed JWTs (``sub``
the client id, ``aud`` the scope asked for) and publishes its keys at a JWKS endpoint, which
is what Kafka's broker-side ``OAuthBearerValidatorCallbackHandler`` checks tokens against.

``OidcProvider.start()`` returns once the discovery document answers; ``stop()`` ends the JVM
by PID (SIGTERM, then SIGKILL) and reaps it. The JVM gets PR_SET_PDEATHSIG, so a killed test
session leaves it behind neither.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from support.connect_jars import maven_libs
from support.kafka import free_port, kafkactl

POM = Path(__file__).with_name("oidc") / "pom.xml"
VERSION = "2.1.10"
MAIN = "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"
#: Measured here: ready in ~3 s, RSS ~150 MB; it answers a handful of requests.
JVM_OPTIONS = ("-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
ISSUER_ID = "default"


class OidcProvider:
    """One mock-oauth2-server process on a free loopback port."""

    def __init__(self, *, ready_timeout: float = 90.0, stop_timeout: float = 15.0) -> None:
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def issuer(self) -> str:
        if self.port is None:
            raise RuntimeError("the OIDC provider is not started")
        return f"http://127.0.0.1:{self.port}/{ISSUER_ID}"

    @property
    def token_url(self) -> str:
        return f"{self.issuer}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    def pids(self) -> list[int]:
        return [self.process.pid] if self.process is not None else []

    def start(self) -> OidcProvider:
        libs = maven_libs(POM, f"oidc-{VERSION}", "mock-oauth2-server-*.jar")
        java = kafkactl.find_java()
        self.port = free_port()
        self.log_path = Path(tempfile.mkdtemp(prefix="connectd-oidc-")) / "oidc.out"
        env = {**os.environ, "SERVER_PORT": str(self.port), "SERVER_HOSTNAME": "127.0.0.1"}
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                [java, *JVM_OPTIONS, "-cp", f"{libs}/*", MAIN],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=kafkactl.proctools.die_with_parent,
            )
        deadline = time.monotonic() + self.ready_timeout
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = kafkactl.tail(self.log_path)
                self.stop()
                raise RuntimeError(f"the OIDC provider did not start:\n{log}")
            time.sleep(0.2)
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.issuer}/.well-known/openid-configuration", timeout=2
            ) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        """End the JVM by PID, reap it and remove its log. Idempotent."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(self.stop_timeout)
        if self.log_path is not None:
            shutil.rmtree(self.log_path.parent, ignore_errors=True)
