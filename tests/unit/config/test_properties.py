"""Reading .properties files: the format is javaproperties'; lines and repeats are ours."""

from __future__ import annotations

from pathlib import Path

from daemon.config.problems import Severity
from daemon.config.properties import parse_properties, read_properties


def test_separators_continuations_and_escapes() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d\t=\t4\n"
        "long = first, \\\n"
        "       second\n"
        "equals\\=key = x\\=y\n"
        "colon\\:key: z\n"
        "unicode = caf\\u00e9 \\u2603\n"
        "spaces\\ in\\ key = v\n"
        "empty=\n"
    )
    parsed = parse_properties(text, "f.properties")
    assert parsed.values == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4",
        "long": "first, second",
        "equals=key": "x=y",
        "colon:key": "z",
        "unicode": "café ☃",
        "spaces in key": "v",
        "empty": "",
    }
    assert parsed.problems == []
    assert parsed.lines["a"] == 3
    assert parsed.lines["long"] == 7
    assert parsed.lines["equals=key"] == 9  # counted after the continuation line


def test_repeated_key_last_wins_with_a_warning() -> None:
    parsed = parse_properties("a=1\nb=2\na=3\n", "f.properties")
    assert parsed.values["a"] == "3"
    [problem] = parsed.problems
    assert problem.severity is Severity.WARNING
    assert (problem.key, problem.line) == ("a", 3)
    assert str(problem) == "f.properties:3: a: set again (first on line 1); the last value is used"


def test_bad_unicode_escape_is_an_error_with_its_line() -> None:
    parsed = parse_properties("a=1\nb=\\uZZZZ\n", "f.properties")
    [problem] = parsed.problems
    assert problem.is_error
    assert problem.line == 2
    assert "\\uZZZZ" in problem.message


def test_crlf_and_cr_line_endings_count_lines() -> None:
    parsed = parse_properties("a=1\r\nb=2\rc=3\n", None)
    assert parsed.values == {"a": "1", "b": "2", "c": "3"}
    assert parsed.lines == {"a": 1, "b": 2, "c": 3}


def test_utf8_file_and_latin1_file_both_load(tmp_path: Path) -> None:
    utf8 = tmp_path / "utf8.properties"
    utf8.write_bytes("name=café\n".encode())
    latin1 = tmp_path / "latin1.properties"
    latin1.write_bytes("name=café\n".encode("iso-8859-1"))
    assert read_properties(utf8).values == {"name": "café"}
    assert read_properties(latin1).values == {"name": "café"}


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    parsed = read_properties(tmp_path / "nope.properties")
    [problem] = parsed.problems
    assert problem.is_error and "cannot read the file" in problem.message
