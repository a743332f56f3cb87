"""Settings: defaults, and one-line errors that name the variable, the value and what is allowed."""

from __future__ import annotations

import pytest

from kagent.settings import Settings, SettingsError, Source, load_settings


def test_defaults_need_no_environment() -> None:
    settings = load_settings({})
    assert settings == Settings()
    assert settings.source is Source.OFFSETS_TOPIC
    assert settings.bootstrap_servers == "127.0.0.1:9092"


def test_values_are_read_from_prefixed_variables_case_insensitively() -> None:
    settings = load_settings(
        {"KAGENT_EVALUATE_INTERVAL": "2.5", "kagent_source": "admin-api", "KAGENT_WEB_PORT": "7000", "PATH": "/bin"}
    )
    assert settings.evaluate_interval == 2.5
    assert settings.source is Source.ADMIN_API
    assert settings.web_port == 7000


@pytest.mark.parametrize(
    ("broker", "bootstrap", "url"),
    [
        ("a:1", "a:1", "kafka://a:1"),
        ("kafka://a:1,b:2", "a:1,b:2", "kafka://a:1;kafka://b:2"),
        (" a:1 , b:2", "a:1,b:2", "kafka://a:1;kafka://b:2"),
    ],
)
def test_broker_forms(broker: str, bootstrap: str, url: str) -> None:
    settings = load_settings({"KAGENT_BROKER": broker})
    assert settings.bootstrap_servers == bootstrap
    assert settings.kafka.faust_broker == url


@pytest.mark.parametrize(
    ("variable", "value", "allowed"),
    [
        ("KAGENT_EVALUATE_INTERVAL", "abc", "valid number"),
        ("KAGENT_EVALUATE_INTERVAL", "0", "greater than 0"),
        ("KAGENT_END_OFFSET_INTERVAL", "-5", "greater than 0"),
        ("KAGENT_SOURCE", "zookeeper", "'offsets-topic' or 'admin-api'"),
        ("KAGENT_WEB_PORT", "70000", "less than or equal to 65535"),
        ("KAGENT_BROKER", "localhost", "host:port"),
        ("KAGENT_BROKER", "a:1,b:x", "host:port"),
        ("KAGENT_APP_ID", "my app", "pattern"),
        ("KAGENT_SESSION_TIMEOUT", "0.5", "greater than or equal to 1"),
        ("KAGENT_TOPIC_PARTITIONS", "0", "greater than or equal to 1"),
        ("KAGENT_STRATEGY", "biggest-first", "allowed: range, roundrobin, sticky"),
        ("KAGENT_LAG_UNIT", "bytes", "'messages' or 'seconds'"),
        ("KAGENT_MIN_IMPROVEMENT", "1.5", "less than 1"),
        ("KAGENT_ONE_RECORD_BATCHES", "maybe", "valid boolean"),
    ],
)
def test_invalid_value_names_variable_value_and_what_is_allowed(variable: str, value: str, allowed: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({variable: value})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"invalid {variable}={value!r}: ")
    assert allowed in message


def test_unknown_variable_is_refused_with_a_suggestion() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({"KAGENT_EVALUTE_INTERVAL": "3"})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("unknown setting KAGENT_EVALUTE_INTERVAL; did you mean KAGENT_EVALUATE_INTERVAL?")


def test_heartbeat_stays_within_a_third_of_the_session_timeout() -> None:
    assert load_settings({"KAGENT_SESSION_TIMEOUT": "2"}).heartbeat_interval == pytest.approx(2 / 3)
    assert load_settings({"KAGENT_SESSION_TIMEOUT": "60"}).heartbeat_interval == 3.0


def test_a_threshold_that_could_never_rearm_is_refused() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings({"KAGENT_SKEW_THRESHOLD": "1.1", "KAGENT_HYSTERESIS": "0.9"})
    assert str(caught.value) == (
        "invalid combination: KAGENT_SKEW_THRESHOLD x KAGENT_HYSTERESIS = 0.99 must exceed 1 with "
        "peak-to-mean skew (its least value is 1), or a group could never re-arm"
    )
    assert load_settings({"KAGENT_SKEW_THRESHOLD": "1.1", "KAGENT_SKEW_METRIC": "gini"}).skew_threshold == 1.1


def test_the_topics_kagent_creates_take_the_replication_factor_set() -> None:
    from kagent.app import create_app  # the Faust app, built without I/O

    assert load_settings({}).topic_replication_factor == 1
    settings = load_settings({"KAGENT_TOPIC_REPLICATION_FACTOR": "3"})
    app, _ = create_app(settings)
    assert app.conf.topic_replication_factor == 3
    with pytest.raises(SettingsError, match="KAGENT_TOPIC_REPLICATION_FACTOR"):
        load_settings({"KAGENT_TOPIC_REPLICATION_FACTOR": "0"})
