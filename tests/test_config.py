"""Settings: defaults < TOML file < RAYMEM_* environment."""

import pytest

from raymem.config import ConfigError, hash_key, load_settings


def test_defaults_match_the_documented_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = load_settings(environ={})
    assert settings.server.host == "127.0.0.1" and settings.server.port == 8000
    assert settings.data_dir == str(tmp_path / "raymem-data")
    assert settings.models.generator == "rules" and settings.models.num_gpus == 0
    assert settings.limits.max_body_bytes == 16 * 2**20
    assert settings.profiles.idle_timeout_s == 600


def test_environment_overrides_the_file_which_overrides_defaults(tmp_path):
    config = tmp_path / "raymem.toml"
    config.write_text(
        'data_dir = "/srv/a"\n[server]\nport = 9000\nhost = "127.0.0.2"\n'
        "[profiles]\nidle_timeout_s = 30\n"
    )
    settings = load_settings(
        config, environ={"RAYMEM_SERVER_PORT": "9100", "RAYMEM_DATA_DIR": "/srv/b"}
    )
    assert settings.server.port == 9100  # environment wins
    assert settings.server.host == "127.0.0.2"  # file wins over default
    assert settings.profiles.idle_timeout_s == 30
    assert settings.data_dir == "/srv/b"


def test_config_file_can_come_from_the_environment(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[limits]\nmax_limit = 7\n")
    assert load_settings(environ={"RAYMEM_CONFIG": str(config)}).limits.max_limit == 7


def test_api_keys_from_the_environment_are_hashed():
    settings = load_settings(environ={"RAYMEM_API_KEYS": "alice=k1, bob=k2"})
    keys = {k.tenant: k.key_sha256 for k in settings.auth.keys}
    assert keys == {"alice": hash_key("k1"), "bob": hash_key("k2")}
    assert all(k.profiles == ["*"] and not k.read_only for k in settings.auth.keys)


@pytest.mark.parametrize(
    ("toml", "env", "fragment"),
    [
        ("[server]\nport = 'eighty'\n", {}, "port"),
        ("[server]\nprot = 80\n", {}, "prot"),
        ("not toml at all [", {}, "Cannot read"),
        ("", {"RAYMEM_SERVER_PORT": "x"}, "port"),
        ("", {"RAYMEM_API_KEYS": "nokey"}, "tenant=key"),
        ("", {"RAYMEM_DURABILITY_MODE": "sometimes"}, "mode"),
    ],
)
def test_invalid_configuration_is_a_clear_error(tmp_path, toml, env, fragment):
    config = tmp_path / "c.toml"
    config.write_text(toml)
    with pytest.raises(ConfigError, match=fragment):
        load_settings(config, environ=env)


def test_missing_config_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="Cannot read configuration file"):
        load_settings(tmp_path / "absent.toml", environ={})
