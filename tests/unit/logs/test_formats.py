"""daemon.logs' formats: JSON lines for shippers, no time stamp under the journal."""

from __future__ import annotations

import io
import json
import logging
import os
import re
from pathlib import Path

from daemon.logs import flush_logging, setup_logging
from daemon.logs.formats import JournalFormatter, JsonFormatter, under_journal


def _record(msg: str = "hello %s", *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("bad value")
        except ValueError as e:
            exc_info = (type(e), e, e.__traceback__)
    record = logging.LogRecord("connectd.t", logging.WARNING, __file__, 1, msg, args, exc_info)
    record.created = 1735732800.123456  # 2025-01-01T12:00:00.123Z
    return record


def test_json_has_the_documented_fields() -> None:
    record = _record("hello %s", "world", exc=True)
    record.connector, record.task = "sink", 2
    doc = json.loads(JsonFormatter().format(record))
    assert doc["time"] == "2025-01-01T12:00:00.123Z"
    assert (doc["level"], doc["logger"], doc["message"]) == ("WARNING", "connectd.t", "hello world")
    assert (doc["connector"], doc["task"]) == ("sink", 2)
    assert isinstance(doc["exc_info"], str)
    assert doc["exc_info"].startswith("Traceback") and "ValueError: bad value" in doc["exc_info"]


def test_json_leaves_out_what_is_unknown_and_stays_on_one_line() -> None:
    text = JsonFormatter().format(_record("two\nlines \u00e9"))
    assert "\n" not in text
    doc = json.loads(text)
    assert doc["message"] == "two\nlines \u00e9"
    assert not {"connector", "task", "exc_info"} & doc.keys()


def test_python_warnings_come_out_as_json(restore_root: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", "json", stream=out)
    logging.getLogger("py.warnings").propagate = True
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("careful", UserWarning, stacklevel=1)
    flush_logging()
    (line,) = out.getvalue().splitlines()
    assert "careful" in json.loads(line)["message"]


def test_journal_format_has_a_priority_and_no_time() -> None:
    record = _record("stopping")
    record.context = "[sink|task-0] "
    assert JournalFormatter().format(record) == "<4>WARNING [sink|task-0] connectd.t: stopping"
    for level, priority in ((logging.ERROR, 3), (logging.INFO, 6), (logging.DEBUG, 7)):
        r = _record("x")
        r.levelno, r.levelname, r.context = level, logging.getLevelName(level), ""
        assert JournalFormatter().format(r).startswith(f"<{priority}>")


def test_under_journal_compares_device_and_inode(tmp_path: Path) -> None:
    with open(tmp_path / "err", "w") as stream, open(tmp_path / "other", "w") as other:
        st = os.fstat(stream.fileno())
        value = f"{st.st_dev}:{st.st_ino}"
        assert under_journal(stream, {"JOURNAL_STREAM": value})
        assert not under_journal(other, {"JOURNAL_STREAM": value})  # inherited, not ours
        assert not under_journal(stream, {})
        assert not under_journal(stream, {"JOURNAL_STREAM": "garbage"})
    assert not under_journal(io.StringIO(), {"JOURNAL_STREAM": value})


def test_setup_logging_under_the_journal_drops_the_time(restore_root: None) -> None:
    out = io.StringIO()
    setup_logging("INFO", "text", stream=out, journal=True)
    logging.getLogger("connectd.x").info("ready")
    setup_logging("INFO", "text", stream=out, journal=False)
    logging.getLogger("connectd.x").info("ready")
    flush_logging()
    journal, plain = out.getvalue().splitlines()
    assert journal == "<6>INFO  connectd.x: ready"
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO  connectd.x: ready$", plain)
