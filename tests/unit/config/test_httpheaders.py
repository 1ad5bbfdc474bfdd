"""``access.control.allow.*`` and ``response.http.headers.config`` as Connect 4.1 reads them
(its RestServerConfig validator's messages, Jetty 12's CrossOriginHandler and HeaderFilter;
each case below was run against a real Connect 4.1.2 worker)."""

from __future__ import annotations

import email.utils

import pytest

from daemon.config.httpheaders import Cors, HeaderRule, HttpSettingError, parse_header_rules
from daemon.config.parse import parse_worker
from daemon.errors import InvalidConfig

_PAIR = "Expected: '[header name]:[header value]'"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("foo X-A: b", "Invalid header config action: 'foo'. Expected one of [set, add, setDate,"
         " addDate]"),
        ("set X-A", f"Invalid format of header name and header value pair 'X-A'. {_PAIR}"),
        ("set", "Invalid format of header config 'set'. Expected: '[action] [header name]:"
         "[header value]'"),
        ("set X A: b", "Invalid header name 'X A'. The '[header name]' cannot contain whitespace"),
        ("set X-A: b:c", "Invalid format of header name and header value pair 'X-A: b:c'."
         f" {_PAIR}"),
        ("set X-A:", f"Invalid format of header name and header value pair 'X-A:'. {_PAIR}"),
        ("set X-A: b,,set X-B: c", "Invalid format of header config ''. Expected: '[action]"
         " [header name]:[header value]'"),
        ("set :b", "Invalid header name ''. The '[header name]' cannot contain whitespace"),
    ],
)  # fmt: skip
def test_bad_header_rules_get_connects_messages(value: str, message: str) -> None:
    with pytest.raises(HttpSettingError) as raised:
        parse_header_rules(value)
    assert raised.value.key == "response.http.headers.config"
    assert raised.value.reason == message


def test_header_rules_as_jetty_reads_them() -> None:
    rules = parse_header_rules(
        '"add Cache-Control: no-cache, no-store", setDate Expires: 3600000, ADD X-B: 2,'
        " adddate X-C: 0, set X-Spaced:  a  b  ,"
    )
    assert rules == (
        HeaderRule("add", "Cache-Control", "no-cache, no-store"),
        HeaderRule("setDate", "Expires", "3600000"),
        HeaderRule("set", "X-B", "2"),  # ADD is accepted, and acts as set
        HeaderRule("add", "X-C", "0"),  # adddate is a plain add
        HeaderRule("set", "X-Spaced", "a  b"),
    )
    when = email.utils.parsedate_to_datetime(rules[1].rendered(1_700_000_000.0))
    assert when.timestamp() == 1_700_000_000 + 3600
    with pytest.raises(HttpSettingError, match="milliseconds"):
        parse_header_rules("setDate X-A: notanumber")
    with pytest.raises(HttpSettingError, match="within the calendar"):
        parse_header_rules("setDate Expires: 1000000000000000")  # year 33715


def test_origins_are_whole_case_insensitive_regular_expressions() -> None:
    cors = Cors.parse("https://a.example.com, https://.*\\.corp\\.test")
    assert cors is not None and cors.methods == "GET,POST,HEAD"
    assert cors.allows("https://a.example.com") and cors.allows("HTTPS://A.EXAMPLE.COM")
    assert cors.allows("https://aXexample.com")  # a dot is any character, as in Connect
    assert not cors.allows("https://a.example.com:443")
    assert cors.allows("https://x.org https://eu.corp.test")  # any space-separated part
    assert Cors.parse("   ") is None
    star = Cors.parse("*", "GET, PUT")
    assert star is not None and star.allows("https://anything") and star.methods == "GET, PUT"
    with pytest.raises(HttpSettingError, match="listed twice"):
        Cors.parse("*", "GET,GET")
    with pytest.raises(HttpSettingError, match="not a regular expression"):
        Cors.parse("https://(")


def test_a_worker_file_names_the_key_at_fault() -> None:
    with pytest.raises(InvalidConfig) as raised:
        parse_worker(
            {
                "bootstrap.servers": "127.0.0.1:9092",
                "access.control.allow.origin": "https://(",
            }
        )
    said = str(raised.value)
    assert "access.control.allow.origin: 'https://(' is not a regular expression" in said
    with pytest.raises(InvalidConfig, match=r"admin\.listeners: 'ftp://x:1' is not an http"):
        parse_worker({"bootstrap.servers": "127.0.0.1:9092", "admin.listeners": "ftp://x:1"})
    config, warnings = parse_worker({"bootstrap.servers": "127.0.0.1:9092", "admin.listeners": ""})
    assert config.admin_listeners == () and warnings == []
    config, _ = parse_worker(
        {"bootstrap.servers": "127.0.0.1:9092", "admin.listeners": "https://127.0.0.1:8084"}
    )
    assert [str(x) for x in config.admin_listeners or ()] == ["https://127.0.0.1:8084"]
