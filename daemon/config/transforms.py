"""A connector's ``transforms`` and ``predicates``, read and checked as Kafka Connect reads them.

Connect's keys: ``transforms`` lists aliases in order; ``transforms.<alias>.type`` names the
class (its full name or Connect's short alias), ``transforms.<alias>.predicate`` a predicate
alias, ``transforms.<alias>.negate`` (default false) applies the transform where the predicate
does *not* hold; every other ``transforms.<alias>.<key>`` is the transform's own setting. The
same for ``predicates`` (no ``predicate``/``negate``).

connectd applies the classes of ``TRANSFORMS`` and ``PREDICATES`` (``daemon.connectors.transforms``
does, on the converted batch); every other class is refused, with the reason, never accepted and
ignored: one of Connect's own that connectd does not apply yet, or a class it does not know.
``chain`` returns the checked chain and every problem, each filed under the key it concerns.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from daemon.config.dateformat import LETTERS, compile_pattern
from daemon.config.problems import Problem, error, warning

_T = "org.apache.kafka.connect.transforms."
_P = _T + "predicates."
FILTER = _T + "Filter"
DROP_HEADERS = _T + "DropHeaders"
INSERT_FIELD = _T + "InsertField"
REPLACE_FIELD = _T + "ReplaceField"
MASK_FIELD = _T + "MaskField"
CAST = _T + "Cast"
EXTRACT_FIELD = _T + "ExtractField"
HOIST_FIELD = _T + "HoistField"
FLATTEN = _T + "Flatten"
VALUE_TO_KEY = _T + "ValueToKey"
INSERT_HEADER = _T + "InsertHeader"
TIMESTAMP_CONVERTER = _T + "TimestampConverter"
HEADER_FROM = _T + "HeaderFrom"
REGEX_ROUTER = _T + "RegexRouter"
TIMESTAMP_ROUTER = _T + "TimestampRouter"
SET_SCHEMA_METADATA = _T + "SetSchemaMetadata"
#: The transforms that change a record's topic.
ROUTERS = (REGEX_ROUTER, TIMESTAMP_ROUTER)
TOPIC_NAME_MATCHES = _P + "TopicNameMatches"
HAS_HEADER_KEY = _P + "HasHeaderKey"
RECORD_IS_TOMBSTONE = _P + "RecordIsTombstone"

#: Cast's target types (Connect's ``Schema.Type`` names, any case).
CAST_TYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string")


def _bool(text: str) -> str | None:
    return None if text.strip().lower() in ("true", "false") else "is not true or false"


def _renames(text: str) -> str | None:
    bad = [m for m in names(text) if len(m.split(":")) != 2]
    return f"invalid rename mapping {bad[0]!r}" if bad else None


def _cast_spec(text: str) -> str | None:
    items = names(text)
    for item in items:
        parts = item.split(":")
        if len(parts) > 2:
            return f"invalid cast {item!r}: a field:type pair or a single type"
        kind = parts[-1].strip().lower()
        if kind not in CAST_TYPES:
            return f"{parts[-1].strip()!r} is not a type Cast casts to ({', '.join(CAST_TYPES)})"
    if len(items) > 1 and any(":" not in item for item in items):
        return "a cast of the whole value (a single type) must be the only one in spec"
    return None


def _non_empty(text: str) -> str | None:
    return None if text else "must not be empty"


@dataclass(frozen=True)
class Key:
    """A transform's or predicate's own setting: Connect's name, type, default and meaning."""

    name: str
    doc: str
    required: bool = False
    default: str | None = None
    type: str = "STRING"  # Connect's ConfigDef type, as GET /connector-plugins/{c}/config says
    expected: str = ""
    check: Callable[[str], str | None] | None = None
    blank_ok: bool = False  # a required setting may be set to "" (Connect's NonNullValidator)


def field_path(text: str, version: str) -> tuple[str, ...]:
    """The steps of a field path: the whole name under ``field.syntax.version=V1``; under
    ``V2`` dot-separated, a step in backticks may hold dots, and a backtick escaped with a
    backslash before a dot is part of its step (``ValueError`` for an unclosed backtick)."""
    if version.strip().upper() != "V2":
        return (text,)
    steps: list[str] = []
    i = 0
    while 0 <= i < len(text):
        if text[i] != "`":
            dot = text.find(".", i)
            steps.append(text[i:] if dot < 0 else text[i:dot])
            i = -1 if dot < 0 else dot + 1
            continue
        opened, i, start, step = i, i + 1, i + 1, ""
        while True:
            i = text.find("`", i)
            if i < 0:
                raise ValueError(f"incomplete backtick pair in path {text!r} at position {opened}")
            escaped = text[i - 1] == "\\"
            if i >= len(text) - 1:
                if escaped:
                    raise ValueError(
                        f"incomplete backtick pair in path {text!r} at position {opened}"
                    )
                steps.append(step + text[start:i])
                i += 1
                break
            if text[i + 1] != ".":
                i += 1
                continue
            if escaped:
                step += text[start : i - 1] + "`"
                i += 1
                start = i
                continue
            steps.append(step + text[start:i])
            i += 2
            break
    if text.endswith("."):
        steps.append("")
    return tuple(steps)


def _one_of(*allowed: str) -> Callable[[str], str | None]:
    return lambda text: None if text in allowed else f"is not one of {', '.join(allowed)}"


def _date_format(text: str) -> str | None:
    try:
        compile_pattern(text)
    except ValueError as e:
        return str(e)
    return None


def java_replacement(text: str) -> str:
    """A Java ``Matcher`` replacement (``$1``, ``${name}``, ``\\$`` for a dollar) as a template
    for Python's ``Match.expand`` (``ValueError`` for a dangling ``$`` or ``\\``)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                raise ValueError("character to be escaped is missing")
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$":
            m = re.match(r"\$(?:\{([A-Za-z][A-Za-z0-9]*)\}|(\d))", text[i:])
            if m is None:
                raise ValueError(f"illegal group reference at {i}")
            out.append(f"\\g<{m.group(1) or m.group(2)}>")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _java_replacement(text: str) -> str | None:
    try:
        java_replacement(text)
    except ValueError as e:
        return str(e)
    return None


def _java_int(text: str) -> str | None:
    try:
        number = int(text.strip())
    except ValueError:
        return "is not a whole number"
    return None if -(2**31) <= number < 2**31 else "is out of Java's int range"


def _syntax(text: str) -> str | None:
    return None if text.strip().upper() in ("V1", "V2") else "is not V1 or V2"


_NULL_DEFAULT = Key(
    "replace.null.with.default",
    "For values with a schema, whether a null field takes its default. connectd's converters"
    " settle a field's default when they read the record (the converter's own"
    " replace.null.with.default), so it changes nothing here.",
    default="true",
    type="BOOLEAN",
    expected="true or false",
    check=_bool,
)
_INSERT_SUFFIX = " Suffix ! (required) or ? (optional, the default) sets the field's optionality."
_INSERT = (
    Key("topic.field", "Field for the record's topic." + _INSERT_SUFFIX),
    Key("partition.field", "Field for the record's partition." + _INSERT_SUFFIX),
    Key("offset.field", "Field for the record's offset." + _INSERT_SUFFIX),
    Key("timestamp.field", "Field for the record's timestamp." + _INSERT_SUFFIX),
    Key("static.field", "Field for static.value." + _INSERT_SUFFIX),
    Key("static.value", "The value of static.field."),
    _NULL_DEFAULT,
)
_REPLACE = (
    Key("exclude", "Fields to drop; wins over include.", default="", type="LIST"),
    Key("include", "Fields to keep (all when empty).", default="", type="LIST"),
    Key(
        "renames",
        "Renames, old:new pairs.",
        default="",
        type="LIST",
        expected="a list of colon-delimited pairs, e.g. foo:bar,abc:xyz",
        check=_renames,
    ),
    _NULL_DEFAULT,
)
_MASK = (
    Key(
        "fields",
        "Fields to mask.",
        required=True,
        type="LIST",
        expected="a comma-separated list of field names",
    ),
    Key(
        "replacement",
        "What a masked value becomes (numbers and strings only); else its type's empty value.",
        expected="a non-empty string",
        check=_non_empty,
    ),
    _NULL_DEFAULT,
)
_CAST = (
    Key(
        "spec",
        "field:type pairs, or one type for the whole value; types: " + ", ".join(CAST_TYPES),
        required=True,
        type="LIST",
        expected="field:type pairs (e.g. a:int32,b:string) or a single type",
        check=_cast_spec,
    ),
    _NULL_DEFAULT,
)


def _sides(cls: str, keys: tuple[Key, ...]) -> dict[str, tuple[Key, ...]]:
    return {f"{cls}$Key": keys, f"{cls}$Value": keys}


#: Applied transforms → their own settings.
TRANSFORMS: dict[str, tuple[Key, ...]] = {
    FILTER: (),
    DROP_HEADERS: (
        Key(
            "headers",
            "DropHeaders removes every header with one of these names.",
            required=True,
            type="LIST",
            expected="a comma-separated list of header names",
        ),
    ),
    **_sides(INSERT_FIELD, _INSERT),
    **_sides(REPLACE_FIELD, _REPLACE),
    **_sides(MASK_FIELD, _MASK),
    **_sides(CAST, _CAST),
    **_sides(
        EXTRACT_FIELD,
        (
            Key("field", "The field whose value becomes the key or value.", required=True),
            Key(
                "field.syntax.version",
                "V1: field is one top-level name; V2: a dotted path into nested maps (backticks"
                " quote a name with dots).",
                default="V1",
                expected="V1 or V2",
                check=_syntax,
            ),
            _NULL_DEFAULT,
        ),
    ),
    **_sides(
        HOIST_FIELD,
        (Key("field", "The one field of the map the key or value is wrapped in.", required=True),),
    ),
    **_sides(
        FLATTEN,
        (Key("delimiter", "Between a nested field's name and its parent's.", default="."),),
    ),
    **_sides(
        TIMESTAMP_CONVERTER,
        (
            Key(
                "field",
                "The field holding the timestamp; empty: the whole key or value.",
                default="",
            ),
            Key(
                "target.type",
                "What the timestamp becomes: string, unix, Date, Time or Timestamp.",
                required=True,
                expected="string, unix, Date, Time or Timestamp",
                check=_one_of("string", "unix", "Date", "Time", "Timestamp"),
            ),
            Key(
                "format",
                "A SimpleDateFormat pattern (UTC): writes target.type=string, reads string"
                " timestamps.",
                default="",
                expected="a SimpleDateFormat pattern of the letters " + " ".join(LETTERS),
                check=_date_format,
            ),
            Key(
                "unix.precision",
                "The unit of a Unix timestamp read or written.",
                default="milliseconds",
                expected="seconds, milliseconds, microseconds or nanoseconds",
                check=_one_of("seconds", "milliseconds", "microseconds", "nanoseconds"),
            ),
            _NULL_DEFAULT,
        ),
    ),
    **_sides(
        HEADER_FROM,
        (
            Key(
                "fields",
                "The fields whose values go into headers.",
                required=True,
                type="LIST",
                expected="a comma-separated list of field names",
            ),
            Key(
                "headers",
                "The headers' names, in the order of fields.",
                required=True,
                type="LIST",
                expected="a comma-separated list of header names, as many as fields",
            ),
            Key(
                "operation",
                "move (the fields leave the key or value) or copy.",
                required=True,
                expected="move or copy",
                check=_one_of("move", "copy"),
            ),
            _NULL_DEFAULT,
        ),
    ),
    REGEX_ROUTER: (
        Key(
            "regex",
            "The regex the whole topic must match to be routed.",
            required=True,
            expected="a regex",
            check=lambda text: _regex(text),
        ),
        Key(
            "replacement",
            "The routed topic: $1 or ${name} stand for a group of the match.",
            required=True,
            blank_ok=True,
            expected="a replacement ($1, ${name} for groups)",
            check=lambda text: _java_replacement(text),
        ),
    ),
    TIMESTAMP_ROUTER: (
        Key(
            "topic.format",
            "The routed topic: ${topic} and ${timestamp} stand for the topic and the record's"
            " time.",
            default="${topic}-${timestamp}",
        ),
        Key(
            "timestamp.format",
            "A SimpleDateFormat pattern (UTC) for ${timestamp}.",
            default="yyyyMMdd",
            expected="a SimpleDateFormat pattern of the letters " + " ".join(LETTERS),
            check=_date_format,
        ),
    ),
    **_sides(
        SET_SCHEMA_METADATA,
        (
            Key("schema.name", "The name the key's or value's schema takes."),
            Key(
                "schema.version",
                "The version the key's or value's schema takes.",
                type="INT",
                expected="a whole number",
                check=_java_int,
            ),
            _NULL_DEFAULT,
        ),
    ),
    VALUE_TO_KEY: (
        Key(
            "fields",
            "The value's fields that make the key (a map of them).",
            required=True,
            type="LIST",
            expected="a comma-separated list of field names",
        ),
        _NULL_DEFAULT,
    ),
    INSERT_HEADER: (
        Key("header", "The name of the header added.", required=True, blank_ok=True),
        Key("value.literal", "The header's value.", required=True, blank_ok=True),
    ),
}
#: Applied predicates → their own settings.
PREDICATES: dict[str, tuple[Key, ...]] = {
    TOPIC_NAME_MATCHES: (
        Key(
            "pattern",
            "TopicNameMatches holds where the whole topic name matches this regex.",
            required=True,
            expected="a regex the whole topic name must match",
            check=lambda text: _regex(text),
        ),
    ),
    HAS_HEADER_KEY: (
        Key(
            "name",
            "HasHeaderKey holds where some header has this name.",
            required=True,
            expected="a header name",
        ),
    ),
    RECORD_IS_TOMBSTONE: (),
}
#: Connect 4.1's other built-in transforms (each with ``$Key`` and ``$Value`` where it has
#: them): known, not applied yet, so refused as such.
NOT_YET: tuple[str, ...] = ()
#: Keys the framework adds to every transform's own (``predicate``, ``negate``) or predicate's.
FRAMEWORK_KEYS = ("type", "predicate", "negate")


def python_regex(text: str) -> str:
    """A Java regex in Python's dialect: ``(?<name>`` groups become ``(?P<name>`` (lookbehinds
    ``(?<=``/``(?<!`` stay), ``\\k<name>`` back references ``(?P=name)``."""
    text = re.sub(r"(?<!\\)\(\?<(?![=!])", "(?P<", text)
    return re.sub(r"\\k<([A-Za-z][A-Za-z0-9]*)>", r"(?P=\1)", text)


def _regex(text: str) -> str | None:
    try:
        re.compile(python_regex(text))
    except re.error as e:
        return f"is not a valid regex: {e}"
    return None


def side(cls: str) -> str:
    """``key`` or ``value``: the part of the record a ``$Key``/``$Value`` transform changes."""
    return "key" if cls.endswith("$Key") else "value"


def class_name(type_name: str) -> str:
    """The full class name for a short alias Connect accepts (``Filter``), else as given."""
    simple = type_name.strip()
    for full in (*TRANSFORMS, *PREDICATES):
        if simple == full.rsplit(".", 1)[1]:
            return full
    return simple


def _connect_builtin(name: str) -> bool:
    """One of Connect's own transforms, by its full name or short alias (``MaskField$Value``)."""
    return name.strip().removeprefix(_T).split("$", 1)[0] in NOT_YET


@dataclass(frozen=True)
class PredicateSpec:
    """A predicate as configured: its alias, class and own settings."""

    alias: str
    cls: str
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TransformSpec:
    """A transform as configured: alias, class, own settings, its predicate and ``negate``."""

    alias: str
    cls: str
    config: Mapping[str, str] = field(default_factory=dict)
    predicate: PredicateSpec | None = None
    negate: bool = False


@dataclass(frozen=True)
class Chain:
    """The checked transforms, in order (the predicates they use inside them)."""

    transforms: tuple[TransformSpec, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.transforms)


def _own(config: Mapping[str, str], alias: str, skip: Sequence[str]) -> dict[str, str]:
    prefix = f"{alias}."
    return {
        k.removeprefix(prefix): v
        for k, v in config.items()
        if k.startswith(prefix) and k.removeprefix(prefix) not in skip
    }


def _class_problem(kind: str, alias: str, given: str, known: Mapping[str, object]) -> Problem:
    key = f"{kind}.{alias}.type"
    applied = ", ".join(n.rsplit(".", 1)[1] for n in known)
    if _connect_builtin(given):
        what = "single message transform" if kind == "transforms" else "predicate"
        return error(
            key,
            f"{given}: connectd does not apply this {what} yet, so records would reach the sink"
            " untransformed",
            f"one of those connectd applies ({applied}), or keep this connector on Kafka Connect"
            " until connectd applies it",
        )
    return error(key, f"{given} is not a {kind[:-1]} class connectd knows", f"one of {applied}")


def _predicate(alias: str, config: Mapping[str, str]) -> tuple[PredicateSpec | None, list[Problem]]:
    given = config.get(f"{alias}.type")
    if given is None:
        return None, [
            error(
                f"predicates.{alias}.type",
                f"predicates lists '{alias}' but its type is not set",
                "a class name",
            )
        ]
    cls = class_name(given)
    if is_python_path(cls):
        own = _own(config, alias, ("type",))
        found = _python_class("predicates", alias, cls, "test", own)
        return (None if found else PredicateSpec(alias, cls, own)), found
    if cls not in PREDICATES:
        return None, [_class_problem("predicates", alias, given, PREDICATES)]
    own, problems = _settings("predicates", alias, cls, _own(config, alias, ("type",)))
    return (None if any(p.is_error for p in problems) else PredicateSpec(alias, cls, own)), problems


def chain_from(config: Mapping[str, str]) -> tuple[Chain, list[Problem]]:
    """The chain of a connector's flat settings (``transforms``, ``transforms.<alias>.*``,
    ``predicates``, ...), and its problems."""
    own = {k: v for k, v in config.items() if k not in ("transforms", "predicates")}
    return chain(
        names(config.get("transforms", "")),
        {k.removeprefix("transforms."): v for k, v in own.items() if k.startswith("transforms.")},
        names(config.get("predicates", "")),
        {k.removeprefix("predicates."): v for k, v in own.items() if k.startswith("predicates.")},
    )


def is_python_path(name: str) -> bool:
    """A transform or predicate written in Python, named ``package.module:Class``."""
    return ":" in name


def _python_class(
    kind: str, alias: str, path: str, method: str, own: Mapping[str, str]
) -> list[Problem]:
    """A Python transform's or predicate's problems: it cannot be imported, is no class with
    ``method``, or its ``configure`` refuses ``own`` (``daemon.connectors.transforms.custom``
    has the interface)."""
    key = f"{kind}.{alias}.type"
    what = "transform" if kind == "transforms" else "predicate"
    module_name, _, attr = path.strip().partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        return [error(key, f"{path} cannot be loaded: {e}", f"an importable module:Class {what}")]
    if not isinstance(obj, type) or not callable(getattr(obj, method, None)):
        base = "Transformation" if method == "apply" else "Predicate"
        return [
            error(
                key,
                f"{path} is not a {what} class (it has no {method}())",
                f"a subclass of daemon.connectors.api.{base}",
            )
        ]
    try:
        obj().configure(dict(own))
    except Exception as e:  # the user's code: whatever it raises refuses its settings
        return [
            error(key, f"{path} refused its settings: {type(e).__name__}: {e}", "settings it takes")
        ]
    return []


def _settings(
    kind: str, alias: str, cls: str, own: Mapping[str, str]
) -> tuple[dict[str, str], list[Problem]]:
    """``own`` with the defaults of the settings it leaves out, and its problems: a required
    setting missing, a value its check refuses, a key the class does not have (a warning)."""
    keys = (TRANSFORMS if kind == "transforms" else PREDICATES)[cls]
    known = {k.name for k in keys}
    where = f"{kind}.{alias}."
    problems: list[Problem] = []
    for k in keys:
        text = own.get(k.name)
        empty = not (names(text) if k.type == "LIST" else text.strip()) if text else True
        if text is None or (k.required and empty and not k.blank_ok):
            if k.required:
                problems.append(error(where + k.name, "is required and has no default", k.expected))
            continue
        why = k.check(text) if k.check is not None else None
        if why is not None:
            problems.append(error(where + k.name, f"{text!r}: {why}", k.expected))
    simple = cls.rsplit(".", 1)[1]
    problems += [
        warning(where + k, f"is not a setting of {simple}: unused") for k in own if k not in known
    ]
    if cls.startswith(INSERT_FIELD + "$"):
        inserted = ("topic.field", "partition.field", "offset.field", "timestamp.field")
        if not any(own.get(k) for k in (*inserted, "static.field")):
            problems.append(
                error(
                    where + "topic.field",
                    "no field insertion configured",
                    "at least one of topic.field, partition.field, offset.field, timestamp.field,"
                    " static.field",
                )
            )
        if own.get("static.field") and own.get("static.value") is None:
            problems.append(
                error(
                    where + "static.value",
                    f"static.field is {own['static.field']!r} but no value is given for it",
                    "the static field's value",
                )
            )
    if cls.startswith(HEADER_FROM + "$") and own.get("fields") and own.get("headers"):
        counts = len(names(own["fields"])), len(names(own["headers"]))
        if counts[0] != counts[1]:
            problems.append(
                error(
                    where + "headers",
                    f"names {counts[1]} header(s) for {counts[0]} field(s)",
                    "as many headers as fields",
                )
            )
    converter = cls.startswith(TIMESTAMP_CONVERTER + "$")
    if converter and own.get("target.type") == "string" and not own.get("format", "").strip():
        problems.append(
            error(
                where + "format",
                "target.type is string but no format is given to write it",
                "a SimpleDateFormat pattern, e.g. yyyy-MM-dd'T'HH:mm:ss",
            )
        )
    if cls.startswith(SET_SCHEMA_METADATA + "$") and not any(
        own.get(k, "").strip() for k in ("schema.name", "schema.version")
    ):
        problems.append(
            error(where + "schema.name", "Neither schema name nor version configured", "either")
        )
    if cls.startswith(EXTRACT_FIELD + "$") and own.get("field") is not None:
        try:
            field_path(own["field"], own.get("field.syntax.version", "V1"))
        except ValueError as e:
            problems.append(error(where + "field", str(e), "a field path"))
    defaults = {k.name: k.default for k in keys if k.default is not None}
    return {**defaults, **own}, problems


def names(text: str) -> tuple[str, ...]:
    """A LIST setting's items (Connect's: comma-separated, trimmed, empty ones dropped)."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def chain(
    transforms: Sequence[str],
    transforms_config: Mapping[str, str],
    predicates: Sequence[str],
    predicates_config: Mapping[str, str],
) -> tuple[Chain, list[Problem]]:
    """The chain a connector configures, and every problem of it (module docstring). The chain
    is empty when any problem is an error."""
    problems: list[Problem] = []
    made: dict[str, PredicateSpec] = {}
    for alias in predicates:
        spec, found = _predicate(alias, predicates_config)
        problems += found
        if spec is not None:
            made[alias] = spec
    specs: list[TransformSpec] = []
    for alias in transforms:
        given = transforms_config.get(f"{alias}.type")
        if given is None:
            problems.append(
                error(
                    f"transforms.{alias}.type",
                    f"transforms lists '{alias}' but its type is not set",
                    "a class name",
                )
            )
            continue
        cls = class_name(given)
        python = is_python_path(cls)
        if not python and cls not in TRANSFORMS:
            problems.append(_class_problem("transforms", alias, given, TRANSFORMS))
            continue
        own = _own(transforms_config, alias, FRAMEWORK_KEYS)
        predicate_alias = transforms_config.get(f"{alias}.predicate", "").strip() or None
        negate_text = transforms_config.get(f"{alias}.negate", "false").strip().lower()
        if negate_text not in ("true", "false"):
            problems.append(
                error(
                    f"transforms.{alias}.negate",
                    f"{negate_text!r} is not a boolean",
                    "true or false",
                )
            )
        if predicate_alias is not None and predicate_alias not in predicates:
            problems.append(
                error(
                    f"transforms.{alias}.predicate",
                    f"names '{predicate_alias}', which predicates does not list",
                    f"one of the aliases in predicates ({', '.join(predicates) or 'none'})",
                )
            )
        elif predicate_alias is None and negate_text == "true":
            problems.append(
                warning(f"transforms.{alias}.negate", "has no effect without a predicate")
            )
        if python:
            problems += _python_class("transforms", alias, cls, "apply", own)
        else:
            own, found = _settings("transforms", alias, cls, own)
            problems += found
        specs.append(
            TransformSpec(
                alias,
                cls,
                own,
                made.get(predicate_alias) if predicate_alias else None,
                negate_text == "true",
            )
        )
    if any(p.is_error for p in problems):
        return Chain(), problems
    return Chain(tuple(specs)), problems
