"""Connector JSON files: both of Connect's forms, scalars as text, nesting refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.config import connector_map_from_json, load_connector
from daemon.config.jsonfile import read_connector_json
from daemon.errors import InvalidConfig

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "config"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_seed_demo_json_loads_like_its_properties_twin() -> None:
    from_json, warnings = load_connector(EXAMPLES / "hang-sink.json")
    from_properties, _ = load_connector(EXAMPLES / "hang-sink.properties")
    assert warnings == []
    assert from_json == from_properties


def test_bare_map_form() -> None:
    values, problems = connector_map_from_json({"name": "c", "connector.class": "X", "topics": "t"})
    assert values == {"name": "c", "connector.class": "X", "topics": "t"}
    assert problems == []


def test_wrapped_form_takes_the_top_level_name_trimmed() -> None:
    values, problems = connector_map_from_json({"name": " c ", "config": {"topics": "t"}})
    assert values == {"topics": "t", "name": "c"}
    assert problems == []


def test_numbers_and_booleans_become_their_text() -> None:
    values, problems = connector_map_from_json(
        {"config": {"tasks.max": 2, "errors.log.enable": True, "off": False, "ratio": 0.5}}
    )
    assert values == {"tasks.max": "2", "errors.log.enable": "true", "off": "false", "ratio": "0.5"}
    assert problems == []


def test_nested_values_are_refused_and_nulls_ignored() -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_connector(FIXTURES / "nested.json")
    text = [str(p) for p in caught.value.problems]
    assert any(
        t.endswith(
            "nested.json: topics: the value is an array; expected a string, number or boolean"
        )
        for t in text
    )
    assert any(
        t.endswith(
            "nested.json: path: the value is an object; expected a string, number or boolean"
        )
        for t in text
    )
    assert len(text) == 2  # topics is not reported again as missing
    _, problems = connector_map_from_json({"a": None})
    [problem] = problems
    assert not problem.is_error and "null" in problem.message


def test_name_mismatch_is_an_error() -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_connector(FIXTURES / "name-mismatch.json")
    [problem] = caught.value.problems
    assert problem.key == "name"
    assert "'one-name' differs from config.name 'another-name'" in str(problem)


def test_equal_names_in_both_places_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps({"name": "c", "config": {"name": " c", "connector.class": "X", "topics": "t"}})
    )
    assert load_connector(path).config.name == "c"


def test_bad_json_names_line() -> None:
    with pytest.raises(InvalidConfig) as caught:
        load_connector(FIXTURES / "bad-syntax.json")
    [problem] = caught.value.problems
    assert problem.line == 7
    assert str(problem).startswith(str(FIXTURES / "bad-syntax.json") + ":7: not valid JSON")


def test_not_an_object_and_unknown_top_level_keys() -> None:
    _, problems = connector_map_from_json(["a"])
    assert problems[0].is_error and "not a JSON object" in problems[0].message
    _, problems = connector_map_from_json({"name": "c", "config": {}, "tasks": [], "extra": 1})
    assert sorted((p.key, p.is_error) for p in problems) == [("extra", True), ("tasks", False)]


def test_repeated_json_key_warns() -> None:
    values, problems = read_connector_json('{"topics": "a", "topics": "b"}')
    assert values == {"topics": "b"}
    assert [p.key for p in problems] == ["topics"]
