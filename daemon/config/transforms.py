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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from daemon.config.problems import Problem, error, warning

_T = "org.apache.kafka.connect.transforms."
_P = _T + "predicates."
FILTER = _T + "Filter"
DROP_HEADERS = _T + "DropHeaders"
TOPIC_NAME_MATCHES = _P + "TopicNameMatches"
HAS_HEADER_KEY = _P + "HasHeaderKey"
RECORD_IS_TOMBSTONE = _P + "RecordIsTombstone"

#: Applied transforms → their own keys (each required).
TRANSFORMS: dict[str, tuple[str, ...]] = {FILTER: (), DROP_HEADERS: ("headers",)}
#: Applied predicates → their own keys (each required).
PREDICATES: dict[str, tuple[str, ...]] = {
    TOPIC_NAME_MATCHES: ("pattern",),
    HAS_HEADER_KEY: ("name",),
    RECORD_IS_TOMBSTONE: (),
}
#: Connect 4.1's other built-in transforms (each with ``$Key`` and ``$Value`` where it has
#: them): known, not applied yet, so refused as such.
NOT_YET = (
    "Cast",
    "ExtractField",
    "Flatten",
    "HeaderFrom",
    "HoistField",
    "InsertField",
    "InsertHeader",
    "MaskField",
    "RegexRouter",
    "ReplaceField",
    "SetSchemaMetadata",
    "TimestampConverter",
    "TimestampRouter",
    "ValueToKey",
)
#: Keys the framework adds to every transform's own (``predicate``, ``negate``) or predicate's.
FRAMEWORK_KEYS = ("type", "predicate", "negate")


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
    if cls not in PREDICATES:
        return None, [_class_problem("predicates", alias, given, PREDICATES)]
    own = _own(config, alias, ("type",))
    problems = [
        error(f"predicates.{alias}.{k}", "is required and has no default", _EXPECTED[k])
        for k in PREDICATES[cls]
        if not own.get(k, "").strip()
    ]
    if cls == TOPIC_NAME_MATCHES and own.get("pattern", "").strip():
        try:
            re.compile(own["pattern"])
        except re.error as e:
            problems.append(
                error(f"predicates.{alias}.pattern", f"is not a valid regex: {e}", "a regex")
            )
    problems += [
        warning(f"predicates.{alias}.{k}", f"is not a setting of {cls.rsplit('.', 1)[1]}: unused")
        for k in own
        if k not in PREDICATES[cls]
    ]
    return (None if any(p.is_error for p in problems) else PredicateSpec(alias, cls, own)), problems


_EXPECTED = {
    "pattern": "a regex the whole topic name must match",
    "name": "a header name",
    "headers": "a comma-separated list of header names",
}
#: What each applied class's own setting means (``GET /connector-plugins/{class}/config``).
KEY_DOCS = {
    "pattern": "TopicNameMatches holds where the whole topic name matches this regex.",
    "name": "HasHeaderKey holds where some header has this name.",
    "headers": "DropHeaders removes every header with one of these names.",
}


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
        if cls not in TRANSFORMS:
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
        problems += [
            error(f"transforms.{alias}.{k}", "is required and has no default", _EXPECTED[k])
            for k in TRANSFORMS[cls]
            if not names(own.get(k, ""))
        ]
        problems += [
            warning(
                f"transforms.{alias}.{k}", f"is not a setting of {cls.rsplit('.', 1)[1]}: unused"
            )
            for k in own
            if k not in TRANSFORMS[cls]
        ]
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
