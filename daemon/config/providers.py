"""Config providers: ``${env:VAR}``, ``${file:/path/to/file.properties:key}``, ``${dir:/dir:file}``.

As in Kafka Connect, a provider is used only when the worker configures it::

    config.providers=env,file
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider

The class may be a Connect class name, its simple name, or a built-in short name (``env``,
``file``, ``directory``); for a provider *named* ``env``, ``file`` or ``directory`` it may be left
out. ``config.providers.<name>.param.<p>`` passes parameters: ``allowlist.pattern`` (env) and
``allowed.paths`` (file, directory) as in Connect.

Worker settings are resolved once, when the worker config loads. Connector configs are stored
with their ``${...}`` text and resolved by ``resolve()`` each time a task starts, so a secret is
never written to the config store and a rotated secret is picked up by a restart. Unlike Connect,
which leaves an unresolvable reference in place as literal text, ``resolve()`` fails naming the
key and the reference.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from daemon.config.problems import Problem, error, raise_if_errors, warning
from daemon.config.properties import read_properties
from daemon.errors import ConfigError

# Connect's own pattern (ConfigTransformer.DEFAULT_PATTERN): ${provider:[path:]key}.
REFERENCE = re.compile(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}")


class ProviderSettings(Protocol):
    """The worker settings that configure providers (``WorkerConfig`` has them): the names in
    ``config.providers`` and the ``config.providers.*`` keys without their prefix."""

    @property
    def config_providers(self) -> tuple[str, ...]: ...

    @property
    def config_provider_settings(self) -> Mapping[str, str]: ...


class ConfigProvider(Protocol):
    """Looks up values for ``${name:path:key}`` references. Called from ``resolve()``.

    ``get`` returns the value of each key it finds (missing keys are left out) and raises
    ``ConfigError`` when ``path`` cannot be used at all. It may block on file I/O: call
    ``resolve()`` from a thread if the files may be slow.
    """

    def get(self, path: str, keys: Set[str]) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class EnvProvider:
    """Environment variables (``${env:VAR}``), limited to names matching ``allowlist.pattern``."""

    allowlist: re.Pattern[str] = re.compile(".*")
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def get(self, path: str, keys: Set[str]) -> Mapping[str, str]:
        if path:
            raise ConfigError(f"the env provider takes no path (got {path!r}); write ${{env:VAR}}")
        return {
            k: self.environ[k] for k in keys if k in self.environ and self.allowlist.fullmatch(k)
        }


def _check_allowed(path: str, allowed: Sequence[Path]) -> Path:
    resolved = Path(os.path.normpath(os.path.abspath(path)))
    if allowed and not any(resolved.is_relative_to(a) for a in allowed):
        raise ConfigError(f"{path} is outside allowed.paths ({', '.join(map(str, allowed))})")
    return resolved


@dataclass(frozen=True)
class FileProvider:
    """Keys of a ``.properties`` file (``${file:/path/to/file.properties:key}``)."""

    allowed: tuple[Path, ...] = ()

    def get(self, path: str, keys: Set[str]) -> Mapping[str, str]:
        parsed = read_properties(_check_allowed(path, self.allowed))
        failures = [p for p in parsed.problems if p.is_error]
        if failures:
            raise ConfigError(str(failures[0]))
        return {k: parsed.values[k] for k in keys if k in parsed.values}


@dataclass(frozen=True)
class DirectoryProvider:
    """Whole files of a directory (``${directory:/run/secrets:db-password}``), as Kubernetes
    mounts secrets. Only regular files directly inside the directory are read."""

    allowed: tuple[Path, ...] = ()

    def get(self, path: str, keys: Set[str]) -> Mapping[str, str]:
        directory = _check_allowed(path, self.allowed)
        if not directory.is_dir():
            raise ConfigError(f"{path} is not a directory")
        out = {}
        for key in keys:
            candidate = directory / key
            if "/" not in key and candidate.is_file():
                out[key] = candidate.read_text(encoding="utf-8")
        return out


_KINDS: dict[str, str] = {
    "org.apache.kafka.common.config.provider.envvarconfigprovider": "env",
    "envvarconfigprovider": "env",
    "env": "env",
    "org.apache.kafka.common.config.provider.fileconfigprovider": "file",
    "fileconfigprovider": "file",
    "file": "file",
    "org.apache.kafka.common.config.provider.directoryconfigprovider": "directory",
    "directoryconfigprovider": "directory",
    "directory": "directory",
    "dir": "directory",
}
_PARAMS = {"env": {"allowlist.pattern"}, "file": {"allowed.paths"}, "directory": {"allowed.paths"}}
_EXPECTED_CLASS = (
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider, FileConfigProvider or "
    "DirectoryConfigProvider (or env, file, directory)"
)


@dataclass(frozen=True)
class ProviderSpec:
    """One configured provider: its name in ``${name:...}``, its kind and its parameters."""

    name: str
    kind: str
    params: Mapping[str, str]

    def build(self) -> ConfigProvider:
        if self.kind == "env":
            return EnvProvider(re.compile(self.params.get("allowlist.pattern", ".*")))
        allowed = tuple(
            Path(os.path.normpath(p.strip()))
            for p in self.params.get("allowed.paths", "").split(",")
            if p.strip()
        )
        return FileProvider(allowed) if self.kind == "file" else DirectoryProvider(allowed)


def provider_specs(
    names: Iterable[str], settings: Mapping[str, str]
) -> tuple[dict[str, ProviderSpec], list[Problem]]:
    """Read ``config.providers`` and its ``config.providers.*`` settings (prefix removed)."""
    names = list(names)
    specs: dict[str, ProviderSpec] = {}
    problems: list[Problem] = []
    for key in settings:
        name = key.split(".", 1)[0]
        if name not in names:
            problems.append(
                warning(
                    f"config.providers.{key}",
                    f"'{name}' is not listed in config.providers; ignored",
                )
            )
    for name in names:
        class_key = f"config.providers.{name}.class"
        class_name = settings.get(f"{name}.class", "").strip() or name
        kind = _KINDS.get(class_name.lower())
        if kind is None:
            given = f"{name}.class" in settings
            message = (
                f"{class_name!r} is not a config provider connectd has"
                if given
                else f"required key is missing ('{name}' is listed in config.providers)"
            )
            problems.append(error(class_key, message, _EXPECTED_CLASS))
            continue
        prefix = f"{name}.param."
        params = {k[len(prefix) :]: v for k, v in settings.items() if k.startswith(prefix)}
        for param in params.keys() - _PARAMS[kind]:
            problems.append(
                warning(
                    f"config.providers.{prefix}{param}",
                    f"the {kind} provider has no parameter '{param}'; ignored",
                )
            )
        if kind == "env" and "allowlist.pattern" in params:
            try:
                re.compile(params["allowlist.pattern"])
            except re.error as exc:
                problems.append(
                    error(
                        f"config.providers.{prefix}allowlist.pattern",
                        f"not a valid regular expression: {exc}",
                    )
                )
                continue
        specs[name] = ProviderSpec(name, kind, params)
    return specs, problems


class Providers(Mapping[str, ConfigProvider]):
    """The configured providers by name. Build with ``Providers.from_worker(worker)``."""

    def __init__(self, providers: Mapping[str, ConfigProvider] | None = None) -> None:
        self._providers = dict(providers or {})

    @classmethod
    def from_specs(cls, specs: Mapping[str, ProviderSpec]) -> Providers:
        return cls({name: spec.build() for name, spec in specs.items()})

    @classmethod
    def from_worker(cls, worker: ProviderSettings) -> Providers:
        specs, problems = provider_specs(worker.config_providers, worker.config_provider_settings)
        raise_if_errors(problems)
        return cls.from_specs(specs)

    def __getitem__(self, name: str) -> ConfigProvider:
        return self._providers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._providers)

    def __len__(self) -> int:
        return len(self._providers)


def has_reference(value: str) -> bool:
    return REFERENCE.search(value) is not None


def _missing(kind: ConfigProvider, path: str, key: str) -> str:
    if isinstance(kind, EnvProvider):
        return f"environment variable {key!r} is not set (or not allowed by allowlist.pattern)"
    if isinstance(kind, FileProvider):
        return f"{path} has no key {key!r}"
    if isinstance(kind, DirectoryProvider):
        return f"{path} has no file {key!r}"
    return f"no value for {key!r}" + (f" at {path}" if path else "")


def resolve_collect(
    config: Mapping[str, str], providers: Mapping[str, ConfigProvider]
) -> tuple[dict[str, str], list[Problem]]:
    """Like ``resolve()``, but returns the problems instead of raising.

    Keys whose value cannot be resolved keep their ``${...}`` text in the returned dict.
    """
    wanted: dict[tuple[str, str], set[str]] = {}
    for value in config.values():
        for m in REFERENCE.finditer(value):
            wanted.setdefault((m.group(1), m.group(2) or ""), set()).add(m.group(3))
    found: dict[tuple[str, str], Mapping[str, str]] = {}
    failed: dict[tuple[str, str], str] = {}
    for (name, path), keys in wanted.items():
        if name not in providers:
            configured = ", ".join(providers) or "none"
            failed[name, path] = (
                f"config provider '{name}' is not configured (configured: {configured}); "
                f"add it to config.providers and set config.providers.{name}.class"
            )
            continue
        try:
            found[name, path] = providers[name].get(path, frozenset(keys))
        except (ConfigError, OSError) as exc:
            failed[name, path] = str(exc)

    problems: list[Problem] = []
    out: dict[str, str] = {}
    for key, value in config.items():
        ok = True

        def substitute(m: re.Match[str], key: str = key) -> str:
            nonlocal ok
            name, path, ref_key = m.group(1), m.group(2) or "", m.group(3)
            reason = failed.get((name, path))
            data = found.get((name, path), {})
            if reason is None and ref_key in data:
                return data[ref_key]
            ok = False
            reason = reason or _missing(providers[name], path, ref_key)
            problems.append(error(key, f"cannot resolve {m.group(0)}: {reason}"))
            return m.group(0)

        resolved = REFERENCE.sub(substitute, value)
        out[key] = resolved if ok else value
    return out, problems


def resolve(
    config: Mapping[str, str], providers: Mapping[str, ConfigProvider], *, file: str | None = None
) -> dict[str, str]:
    """``config`` with every ``${provider:[path:]key}`` replaced by the provider's value.

    Returns a new dict; ``config`` is not changed (stored configs keep their references). Raises
    ``InvalidConfig`` (a ``ConfigError``) naming every key and reference that cannot be resolved.
    """
    out, problems = resolve_collect(config, providers)
    raise_if_errors(p.located(file) for p in problems)
    return out
