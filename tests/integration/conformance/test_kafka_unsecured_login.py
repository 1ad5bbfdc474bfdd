"""connectd's unsecured OAUTHBEARER tokens (``daemon.kafka.oauthbearer``) against Kafka's own
login handler, ``OAuthBearerUnsecuredLoginCallbackHandler`` of kafka-clients 4.1, on the same
JAAS options: the same header, the same claims (list claims split alike, number claims as
numbers), the same lifetime, the same SASL extensions; options Kafka refuses are refused."""

from __future__ import annotations

from typing import Any

import pytest
from support import jwt
from support.connect_jars import connect_libs, unsecured_logins

from daemon.kafka import oauthbearer as ob

pytestmark = pytest.mark.integration

CASES: list[dict[str, str]] = [
    {"unsecuredLoginStringClaim_sub": "alice"},
    {
        "unsecuredLoginStringClaim_sub": "alice",
        "unsecuredLoginListClaim_scope": "|read|write",
        "unsecuredLoginNumberClaim_level": "3",
        "unsecuredLoginLifetimeSeconds": "60",
        "unsecuredLoginExtension_traceId": "123",
    },
    {"unsecuredLoginStringClaim_name": "bob", "unsecuredLoginPrincipalClaimName": "name"},
    {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginListClaim_groups": ",x,,y,"},
    {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginListClaim_roles": "."},
    {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginListClaim_roles": "^a^b"},
    {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "2.5e3"},
]
REFUSED: list[dict[str, str]] = [
    {"unsecuredLoginStringClaim_exp": "1", "unsecuredLoginStringClaim_sub": "a"},
    {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "soon"},
    {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "many"},
    {"unsecuredLoginStringClaim_name": "a"},  # no principal (sub)
    {"unsecuredLoginExtension_x": "y"},
    {"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginExtension_auth": "y"},
]


def _lifetime_and_rest(claims: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    rest = {k: v for k, v in claims.items() if k not in ("iat", "exp")}
    # The times differ, the lifetime does not (to a tenth of a second: Kafka reads its clock
    # once for exp and again for iat).
    return round(claims["exp"] - claims["iat"], 1), rest


def test_unsecured_tokens_are_kafkas() -> None:
    theirs = unsecured_logins(connect_libs(), CASES)
    for options, kafka in zip(CASES, theirs, strict=True):
        assert "token" in kafka, (options, kafka)
        ours, extensions = _login(options)
        their_header, their_claims, their_signature = jwt.parts(kafka["token"])
        our_header, our_claims, our_signature = jwt.parts(ours)
        assert (our_header, our_signature) == (their_header, their_signature), options
        assert _lifetime_and_rest(our_claims) == _lifetime_and_rest(their_claims), options
        assert extensions == kafka["extensions"], options


def test_options_kafka_refuses_are_refused() -> None:
    theirs = unsecured_logins(connect_libs(), REFUSED)
    for options, kafka in zip(REFUSED, theirs, strict=True):
        assert "error" in kafka, (options, kafka)
        with pytest.raises(ob.OAuthBearerError):
            _login(options)


def _login(options: dict[str, str]) -> tuple[str, dict[str, str]]:
    """What connectd's token source makes of the options: the token and the extensions."""
    return ob.unsecured_token(options), ob.extensions(options, secured=False)
