"""Problem: one line naming file, line, key, what is wrong and what is expected."""

from __future__ import annotations

from daemon.config.problems import Problem, Severity, raise_if_errors, suggest, unknown_key
from daemon.errors import ConfigError, InvalidConfig


def test_one_line_form() -> None:
    p = Problem(
        "w.properties",
        "offset.flush.interval.ms",
        "'abc' is not a number",
        "milliseconds as an integer ≥ 0",
    )
    assert str(p) == (
        "w.properties: offset.flush.interval.ms: 'abc' is not a number; "
        "expected milliseconds as an integer ≥ 0"
    )
    assert (
        str(Problem("w.properties", None, "cannot read", line=3)) == "w.properties:3: cannot read"
    )
    assert str(Problem(None, "k", "bad")) == "k: bad"


def test_located_fills_only_what_is_missing() -> None:
    p = Problem(None, "k", "bad").located("f", {"k": 7})
    assert (p.file, p.line) == ("f", 7)
    assert Problem("g", "k", "bad").located("f").file == "g"


def test_invalid_config_carries_every_problem() -> None:
    problems = [Problem("f", "a", "x"), Problem("f", "b", "y", severity=Severity.WARNING)]
    try:
        raise_if_errors(problems)
    except InvalidConfig as exc:
        assert isinstance(exc, ConfigError) and not exc.retriable
        assert exc.problems == tuple(problems)
        assert str(exc) == "f: a: x\nf: b: y"
    else:
        raise AssertionError("no error raised")
    assert raise_if_errors(problems[1:]) == problems[1:]


def test_suggestions() -> None:
    assert suggest("tasks.mx", ["tasks.max", "topics"]) == "tasks.max"
    assert suggest("zzz", ["tasks.max"]) is None
    assert (
        str(unknown_key("topic", ["topics"], Severity.ERROR))
        == "topic: unknown key 'topic', did you mean 'topics'?"
    )
