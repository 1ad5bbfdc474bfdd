"""Config providers: ${env:...}, ${file:...:...}, ${directory:...:...}; resolved, never stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import Providers, load_connector, parse_connector, parse_worker, resolve
from daemon.config.providers import EnvProvider, FileProvider
from daemon.errors import ConfigError, InvalidConfig

ENV_AND_FILE = {
    "config.providers": "env,file",
    "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
    "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
}


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    path = tmp_path / "secrets.properties"
    path.write_text("db.password=s3cret\nuser : admin\n")
    return path


def _providers(**extra: str) -> Providers:
    return Providers.from_worker(parse_worker({**ENV_AND_FILE, **extra}).config)


def test_env_and_file_references_resolve(monkeypatch: pytest.MonkeyPatch, secrets: Path) -> None:
    monkeypatch.setenv("CONNECTD_TEST_TOPIC", "events")
    stored = {
        "topics": "${env:CONNECTD_TEST_TOPIC}",
        "password": f"${{file:{secrets}:db.password}}",
        "dsn": f"pg://${{file:{secrets}:user}}@host/${{env:CONNECTD_TEST_TOPIC}}",
        "plain": "no references",
    }
    before = dict(stored)
    resolved = resolve(stored, _providers())
    assert resolved == {
        "topics": "events",
        "password": "s3cret",
        "dsn": "pg://admin@host/events",
        "plain": "no references",
    }
    assert stored == before  # never written back


def test_connector_config_keeps_references_and_resolves_at_task_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, secrets: Path
) -> None:
    path = tmp_path / "c.properties"
    path.write_text(
        "name=c\nconnector.class=X\ntopics=t\ntasks.max=${env:CONNECTD_TEST_TASKS}\n"
        f"password=${{file:{secrets}:db.password}}\n"
    )
    stored, _ = load_connector(path)
    assert stored.properties["password"] == f"${{file:{secrets}:db.password}}"
    monkeypatch.setenv("CONNECTD_TEST_TASKS", "3")
    at_start, warnings = parse_connector(resolve(stored.properties, _providers()))
    assert warnings == []
    assert at_start.tasks_max == 3
    assert at_start.connector_settings["password"] == "s3cret"
    assert "s3cret" not in path.read_text()


def test_unresolvable_references_name_key_and_reference(
    monkeypatch: pytest.MonkeyPatch, secrets: Path, tmp_path: Path
) -> None:
    monkeypatch.delenv("CONNECTD_TEST_UNSET", raising=False)
    config = {
        "a": "${env:CONNECTD_TEST_UNSET}",
        "b": f"${{file:{secrets}:nope}}",
        "c": f"${{file:{tmp_path}/missing.properties:k}}",
        "d": "${vault:secret/data:k}",
    }
    with pytest.raises(InvalidConfig) as caught:
        resolve(config, _providers(), file="c.json")
    text = [str(p) for p in caught.value.problems]
    assert len(text) == 4
    assert text[0] == (
        "c.json: a: cannot resolve ${env:CONNECTD_TEST_UNSET}: environment variable "
        "'CONNECTD_TEST_UNSET' is not set (or not allowed by allowlist.pattern)"
    )
    assert f"b: cannot resolve ${{file:{secrets}:nope}}: {secrets} has no key 'nope'" in text[1]
    assert "c: cannot resolve" in text[2] and "cannot read the file" in text[2]
    assert (
        "d: cannot resolve ${vault:secret/data:k}: config provider 'vault' is not configured"
        in text[3]
    )
    assert isinstance(caught.value, ConfigError)


def test_only_configured_providers_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONNECTD_TEST_X", "x")
    with pytest.raises(InvalidConfig, match="config provider 'env' is not configured"):
        resolve({"a": "${env:CONNECTD_TEST_X}"}, Providers())


def test_short_names_and_omitted_classes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONNECTD_TEST_X", "x")
    worker = parse_worker(
        {"config.providers": "env,secrets", "config.providers.secrets.class": "directory"}
    ).config
    providers = Providers.from_worker(worker)
    assert resolve({"a": "${env:CONNECTD_TEST_X}"}, providers) == {"a": "x"}
    assert set(providers) == {"env", "secrets"}


def test_directory_provider(tmp_path: Path) -> None:
    (tmp_path / "db-password").write_text("hunter2")
    providers = _providers(
        **{"config.providers": "dir", "config.providers.dir.class": "DirectoryConfigProvider"}
    )
    assert resolve({"p": f"${{dir:{tmp_path}:db-password}}"}, providers) == {"p": "hunter2"}
    with pytest.raises(InvalidConfig, match="has no file 'nope'"):
        resolve({"p": f"${{dir:{tmp_path}:nope}}"}, providers)


def test_bad_provider_class_is_a_config_error() -> None:
    with pytest.raises(InvalidConfig) as caught:
        parse_worker(
            {"config.providers": "vault", "config.providers.vault.class": "com.example.Vault"}
        )
    [problem] = caught.value.problems
    assert problem.key == "config.providers.vault.class"
    assert "'com.example.Vault' is not a config provider connectd has" in problem.message


def test_provider_settings_for_unlisted_names_warn() -> None:
    _, warnings = parse_worker({"config.providers.file.class": "file"})
    assert [w.key for w in warnings] == ["config.providers.file.class"]


def test_worker_values_resolve_with_the_worker_providers(
    monkeypatch: pytest.MonkeyPatch, secrets: Path
) -> None:
    monkeypatch.setenv("CONNECTD_TEST_BOOTSTRAP", "broker:9092")
    config, _ = parse_worker(
        {
            **ENV_AND_FILE,
            "bootstrap.servers": "${env:CONNECTD_TEST_BOOTSTRAP}",
            "ssl.key.password": f"${{file:{secrets}:db.password}}",
        }
    )
    assert config.bootstrap_servers == ("broker:9092",)
    assert config.ssl_key_password is not None
    assert config.ssl_key_password.get_secret_value() == "s3cret"
    with pytest.raises(InvalidConfig, match=r"group\.id: cannot resolve"):
        parse_worker({**ENV_AND_FILE, "group.id": "${env:CONNECTD_TEST_UNSET_2}"})


def test_env_allowlist_and_file_allowed_paths(tmp_path: Path, secrets: Path) -> None:
    env = EnvProvider(
        allowlist=__import__("re").compile("CONNECTD_.*"), environ={"CONNECTD_A": "1", "HOME": "/h"}
    )
    assert env.get("", {"CONNECTD_A", "HOME"}) == {"CONNECTD_A": "1"}
    with pytest.raises(ConfigError, match="takes no path"):
        env.get("/x", {"A"})
    allowed = FileProvider(allowed=(tmp_path,))
    assert allowed.get(str(secrets), {"user"}) == {"user": "admin"}
    with pytest.raises(ConfigError, match=r"outside allowed\.paths"):
        allowed.get(str(tmp_path / ".." / "elsewhere.properties"), {"k"})
    providers = _providers(**{"config.providers.file.param.allowed.paths": str(tmp_path / "sub")})
    with pytest.raises(InvalidConfig, match=r"outside allowed\.paths"):
        resolve({"p": f"${{file:{secrets}:user}}"}, providers)


def test_listed_provider_without_a_class() -> None:
    with pytest.raises(InvalidConfig) as caught:
        parse_worker({"config.providers": "vault"})
    [problem] = caught.value.problems
    assert str(problem).startswith(
        "config.providers.vault.class: required key is missing ('vault' is listed in "
        "config.providers); expected org.apache.kafka.common.config.provider.EnvVarConfigProvider"
    )
