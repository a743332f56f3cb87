"""Security settings: validated at start-up with one line naming the variable, never shown, and handed
to aiokafka, Faust and Spark's tasks as each takes them."""

from __future__ import annotations

import pickle
import ssl
from pathlib import Path

import pytest
from faust.auth import OAuthCredentials, SASLCredentials, SSLCredentials

from kagent.connections import KafkaConnection
from kagent.security import MskIamTokenProvider, SaslMechanism, Security, SecurityProtocol, TokenFileProvider
from kagent.settings import SettingsError, load_settings
from tests.support.tls import Authority

SCRAM = {
    "KAGENT_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "KAGENT_SASL_MECHANISM": "SCRAM-SHA-512",
    "KAGENT_SASL_USERNAME": "kagent",
    "KAGENT_SASL_PASSWORD": "hunter2-secret",
}


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("ca"))


def test_plaintext_by_default_and_faust_gets_no_credentials() -> None:
    kafka = load_settings({}).kafka
    assert kafka.security == Security()
    assert kafka.client_options() == {"bootstrap_servers": "127.0.0.1:9092", "security_protocol": "PLAINTEXT"}
    assert "broker_credentials" not in kafka.faust_options()


def test_scram_reaches_aiokafka_and_faust_and_the_password_is_never_shown() -> None:
    settings = load_settings(SCRAM)
    options = settings.kafka.client_options()
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("kagent", "hunter2-secret")
    credentials = settings.kafka.faust_options()["broker_credentials"]
    assert isinstance(credentials, SASLCredentials) and credentials.mechanism.value == "SCRAM-SHA-512"
    for shown in (repr(settings), str(settings), repr(settings.kafka), settings.security.describe()):
        assert "hunter2" not in shown
    assert settings.security.describe() == "SASL_PLAINTEXT, SCRAM-SHA-512 as 'kagent'"


def test_the_password_file_is_read_once_without_its_newline(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-a-file\n")
    env = {k: v for k, v in SCRAM.items() if k != "KAGENT_SASL_PASSWORD"} | {"KAGENT_SASL_PASSWORD_FILE": str(secret)}
    settings = load_settings(env)
    assert settings.security.sasl_password == "from-a-file"
    secret.write_text("changed")
    assert settings.kafka.security.sasl_password == "from-a-file"


def test_tls_builds_one_verifying_context_for_aiokafka_and_faust(authority: Authority) -> None:
    client = authority.issue("client", hosts=(), client=True)
    settings = load_settings(
        {
            "KAGENT_SECURITY_PROTOCOL": "SSL",
            "KAGENT_SSL_CAFILE": str(authority.cafile),
            "KAGENT_SSL_CERTFILE": str(client.cert),
            "KAGENT_SSL_KEYFILE": str(client.key),
        }
    )
    context = settings.kafka.client_options()["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert settings.kafka.client_options()["ssl_context"] is context  # one per process and settings
    credentials = settings.kafka.faust_options()["broker_credentials"]
    assert isinstance(credentials, SSLCredentials) and credentials.context is context


def test_oauthbearer_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("eyJ.token.1\n")
    settings = load_settings(
        {
            "KAGENT_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "KAGENT_SASL_MECHANISM": "OAUTHBEARER",
            "KAGENT_SASL_OAUTHBEARER_PROVIDER": "file",
            "KAGENT_SASL_OAUTHBEARER_TOKEN_FILE": str(token),
        }
    )
    provider = settings.kafka.client_options()["sasl_oauth_token_provider"]
    assert isinstance(provider, TokenFileProvider)
    assert isinstance(settings.kafka.faust_options()["broker_credentials"], OAuthCredentials)

    import asyncio

    assert asyncio.run(provider.token()) == "eyJ.token.1"
    token.write_text("eyJ.token.2")  # refreshed on disk by whoever owns it
    assert asyncio.run(provider.token()) == "eyJ.token.2"

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAKAGENTUNITTEST01")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "unit-test-secret")
    msk = MskIamTokenProvider("eu-central-1")

    async def twice() -> tuple[str, str]:
        return await msk.token(), await msk.token()

    first, second = asyncio.run(twice())
    assert first == second and first  # signed once, reused until a minute before it expires


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KAGENT_SECURITY_PROTOCOL": "TLS"}, "invalid KAGENT_SECURITY_PROTOCOL='TLS': allowed: 'PLAINTEXT', 'SSL'"),
        ({"KAGENT_SECURITY_PROTOCOL": "SASL_SSL"}, "KAGENT_SECURITY_PROTOCOL=SASL_SSL needs KAGENT_SASL_MECHANISM"),
        ({**SCRAM, "KAGENT_SASL_MECHANISM": "GSSAPI"}, "invalid KAGENT_SASL_MECHANISM='GSSAPI'"),
        ({**SCRAM, "KAGENT_SASL_USERNAME": ""}, "KAGENT_SASL_MECHANISM=SCRAM-SHA-512 needs KAGENT_SASL_USERNAME"),
        (
            {**SCRAM, "KAGENT_SASL_PASSWORD_FILE": "/etc/hostname"},
            "needs exactly one of KAGENT_SASL_PASSWORD and KAGENT_SASL_PASSWORD_FILE",
        ),
        (
            {**SCRAM, "KAGENT_SASL_PASSWORD_FILE": "/nonexistent/secret"},
            "invalid KAGENT_SASL_PASSWORD_FILE='/nonexistent/secret': cannot read it: No such file",
        ),
        ({"KAGENT_SASL_MECHANISM": "PLAIN"}, "KAGENT_SASL_MECHANISM is set but KAGENT_SECURITY_PROTOCOL=PLAINTEXT"),
        ({"KAGENT_SSL_CAFILE": "/etc/hostname"}, "KAGENT_SSL_CAFILE is set but KAGENT_SECURITY_PROTOCOL=PLAINTEXT"),
        (
            {"KAGENT_SECURITY_PROTOCOL": "SSL", "KAGENT_SSL_CAFILE": "/etc/hostname"},
            "cannot load the TLS files KAGENT_SSL_CAFILE=/etc/hostname",
        ),
        (
            {"KAGENT_SECURITY_PROTOCOL": "SSL", "KAGENT_SSL_KEYFILE": "/etc/hostname"},
            "KAGENT_SSL_KEYFILE is set without KAGENT_SSL_CERTFILE",
        ),
        (
            {**SCRAM, "KAGENT_SASL_MECHANISM": "OAUTHBEARER"},
            "KAGENT_SASL_MECHANISM=OAUTHBEARER needs KAGENT_SASL_OAUTHBEARER_PROVIDER (aws-msk-iam, file)",
        ),
        (
            {**SCRAM, "KAGENT_SASL_MECHANISM": "OAUTHBEARER", "KAGENT_SASL_OAUTHBEARER_PROVIDER": "aws-msk-iam"},
            "KAGENT_SASL_OAUTHBEARER_PROVIDER=aws-msk-iam needs KAGENT_AWS_REGION",
        ),
    ],
)
def test_a_bad_security_setting_stops_start_up_with_one_line_naming_it(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(env)
    text = str(caught.value)
    assert message in text and "\n" not in text
    assert "hunter2" not in text


def test_a_key_that_is_not_the_certificates_stops_start_up(authority: Authority) -> None:
    one, other = authority.issue("one", client=True), authority.issue("other", client=True)
    env = {
        "KAGENT_SECURITY_PROTOCOL": "SSL",
        "KAGENT_SSL_CERTFILE": str(one.cert),
        "KAGENT_SSL_KEYFILE": str(other.key),
    }
    with pytest.raises(SettingsError, match=r"cannot load the TLS files KAGENT_SSL_CERTFILE=.*KEY_VALUES_MISMATCH"):
        load_settings(env)


def test_a_connection_travels_to_spark_tasks_as_options_and_by_pickle() -> None:
    kafka = KafkaConnection(
        "a:9093,b:9093",
        Security(
            SecurityProtocol.SASL_SSL,
            ssl_cafile="/etc/kafka/ca.pem",
            ssl_check_hostname=False,
            sasl_mechanism=SaslMechanism.SCRAM_SHA_256,
            sasl_username="spark",
            sasl_password="p",
        ),
    )
    options = kafka.spark_options()
    assert options == {
        "kafka.bootstrap.servers": "a:9093,b:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.cafile": "/etc/kafka/ca.pem",
        "kafka.ssl.check.hostname": "false",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.username": "spark",
        "kafka.sasl.password": "p",
    }
    assert KafkaConnection.from_spark_options(options) == kafka
    assert pickle.loads(pickle.dumps(kafka)) == kafka
    with pytest.raises(ValueError, match=r"option kafka\.sasl\.mechanism=.GSSAPI. is not valid"):
        KafkaConnection.from_spark_options({**options, "kafka.sasl.mechanism": "GSSAPI"})
