"""TLS and SASL on every connection: a real worker, the simulator and aiokafka clients made by kagent's
one factory, against the embedded broker behind a security front (``tests/support/security_front.py``
says why a front, and what in it is the test's own).

Mechanisms tested end to end: TLS with mutual authentication; SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN
over SASL_PLAINTEXT and SASL_SSL; OAUTHBEARER with Amazon MSK IAM tokens signed by Amazon's signer
(test AWS credentials; no AWS is reached). Refusals: a wrong password, an untrusted certificate, a
certificate for another host, a missing client certificate and a plaintext client at a TLS listener
each stop start-up with the line that says which, not after the reach timeout.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from kagent.connections import ClusterRejected, KafkaConnection
from kagent.security import OAuthProvider, SaslMechanism, Security, SecurityProtocol
from kagent.tools.embedded import create_topics, free_port
from kagent.tools.simulator.runner import run_simulation
from kagent.tools.simulator.scenario import GroupSpec, MemberSpec, Scenario, TopicSpec, TrafficSpec
from tests.support.security_front import SecurityFront, secured_broker
from tests.support.tls import Authority, Issued
from tests.support.waiting import wait_until
from tests.support.web import get_json
from tests.support.worker import Worker, kagent_env

pytestmark = pytest.mark.integration

USERS = {
    "SCRAM-SHA-256": {"alice": "alice-256-secret"},
    "SCRAM-SHA-512": {"kagent": "kagent-512-secret"},
    "PLAIN": {"bob": "bob-plain-secret"},
}
MSK = {"msk_region": "us-east-1", "msk_access_key": "AKIAKAGENTTEST000001"}


@dataclass(frozen=True)
class Pki:
    ca: Authority
    rogue: Authority
    broker: Issued
    elsewhere: Issued
    """A broker certificate for another host name."""
    client: Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = Authority(directory)
    return Pki(
        ca=ca,
        rogue=Authority(directory, "rogue"),
        broker=ca.issue("broker"),
        elsewhere=ca.issue("elsewhere", hosts=("broker.elsewhere.example",)),
        client=ca.issue("kagent", hosts=(), client=True),
    )


@pytest.fixture(scope="module")
def mutual_tls(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecurityFront]:
    """TLS that requires a client certificate from the test's authority."""
    with secured_broker(
        tmp_path_factory.mktemp("mtls"),
        cert=str(pki.broker.cert),
        key=str(pki.broker.key),
        client_ca=str(pki.ca.cafile),
    ) as front:
        yield front


@pytest.fixture(scope="module")
def sasl_ssl(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecurityFront]:
    with secured_broker(
        tmp_path_factory.mktemp("sasl-ssl"), cert=str(pki.broker.cert), key=str(pki.broker.key), users=USERS, **MSK
    ) as front:
        yield front


@pytest.fixture(scope="module")
def sasl_plaintext(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecurityFront]:
    with secured_broker(tmp_path_factory.mktemp("sasl-plaintext"), users=USERS) as front:
        yield front


def mtls(pki: Pki) -> Security:
    return Security(
        SecurityProtocol.SSL,
        ssl_cafile=str(pki.ca.cafile),
        ssl_certfile=str(pki.client.cert),
        ssl_keyfile=str(pki.client.key),
    )


def scram512(pki: Pki, password: str = USERS["SCRAM-SHA-512"]["kagent"]) -> Security:
    return Security(
        protocol=SecurityProtocol.SASL_SSL,
        ssl_cafile=str(pki.ca.cafile),
        sasl_mechanism=SaslMechanism.SCRAM_SHA_512,
        sasl_username="kagent",
        sasl_password=password,
    )


async def round_trip(kafka: KafkaConnection) -> list[bytes]:
    """Create a topic, produce three records and read them back, every client made by ``kafka``."""
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    await create_topics(kafka, {topic: 1})
    producer = kafka.producer()
    await producer.start()
    try:
        for i in range(3):
            await producer.send_and_wait(topic, b"record-%d" % i, partition=0)
    finally:
        await producer.stop()
    consumer = kafka.consumer(topic, auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    try:
        batches = await consumer.getmany(timeout_ms=10_000, max_records=3)
        return [record.value for records in batches.values() for record in records if record.value is not None]
    finally:
        await consumer.stop()


@pytest.fixture
def aws_test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials the default AWS chain finds; signing is local, so no AWS is reached."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", MSK["msk_access_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "kagent-test-secret-key-that-signs-nothing-real")
    for variable in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)


MECHANISMS = [
    pytest.param(SaslMechanism.SCRAM_SHA_256, "alice", id="SCRAM-SHA-256"),
    pytest.param(SaslMechanism.SCRAM_SHA_512, "kagent", id="SCRAM-SHA-512"),
    pytest.param(SaslMechanism.PLAIN, "bob", id="PLAIN"),
]


@pytest.mark.parametrize(("mechanism", "user"), MECHANISMS)
async def test_clients_round_trip_over_sasl_ssl(
    sasl_ssl: SecurityFront, pki: Pki, mechanism: SaslMechanism, user: str
) -> None:
    security = Security(
        protocol=SecurityProtocol.SASL_SSL,
        ssl_cafile=str(pki.ca.cafile),
        sasl_mechanism=mechanism,
        sasl_username=user,
        sasl_password=USERS[mechanism.value][user],
    )
    assert await round_trip(KafkaConnection(sasl_ssl.bootstrap_servers, security)) == [
        b"record-0",
        b"record-1",
        b"record-2",
    ]


@pytest.mark.parametrize(("mechanism", "user"), MECHANISMS)
async def test_clients_round_trip_over_sasl_plaintext(
    sasl_plaintext: SecurityFront, mechanism: SaslMechanism, user: str
) -> None:
    security = Security(
        protocol=SecurityProtocol.SASL_PLAINTEXT,
        sasl_mechanism=mechanism,
        sasl_username=user,
        sasl_password=USERS[mechanism.value][user],
    )
    assert len(await round_trip(KafkaConnection(sasl_plaintext.bootstrap_servers, security))) == 3


async def test_clients_round_trip_over_mutual_tls(mutual_tls: SecurityFront, pki: Pki) -> None:
    assert len(await round_trip(KafkaConnection(mutual_tls.bootstrap_servers, mtls(pki)))) == 3


@pytest.mark.usefixtures("aws_test_credentials")
async def test_msk_iam_tokens_from_amazons_signer_reach_the_broker(sasl_ssl: SecurityFront, pki: Pki) -> None:
    """The provider is called, signs with the credentials of the default chain for the region, and
    aiokafka hands its token to the broker, which checks it is an MSK IAM token signed with that key."""
    security = Security(
        protocol=SecurityProtocol.SASL_SSL,
        ssl_cafile=str(pki.ca.cafile),
        sasl_mechanism=SaslMechanism.OAUTHBEARER,
        oauth_provider=OAuthProvider.AWS_MSK_IAM,
        aws_region="us-east-1",
    )
    assert len(await round_trip(KafkaConnection(sasl_ssl.bootstrap_servers, security))) == 3
    wrong_region = replace(security, aws_region="eu-west-1")
    with pytest.raises(
        ClusterRejected, match=r"rejected kagent's SASL credentials.*not an MSK IAM token for us-east-1"
    ):
        await KafkaConnection(sasl_ssl.bootstrap_servers, wrong_region).check_reachable(10)


REFUSALS = {
    "wrong password": "rejected kagent's SASL credentials .*invalid-proof",
    "mechanism not offered": "rejected the SASL mechanism",
    "untrusted certificate": "its TLS certificate is not trusted: self-signed certificate in certificate chain",
    "certificate for another host": "its TLS certificate is not trusted: IP address mismatch",
    "no client certificate": "closed the connection during kagent's first request",
    "plaintext client at a TLS listener": "closed the connection during kagent's first request",
}


@pytest.mark.parametrize(("case", "expected"), REFUSALS.items(), ids=list(REFUSALS))
async def test_a_refusal_fails_at_once_and_says_which(
    case: str,
    expected: str,
    pki: Pki,
    sasl_ssl: SecurityFront,
    sasl_plaintext: SecurityFront,
    mutual_tls: SecurityFront,
    tmp_path: Path,
) -> None:
    """Each is a :class:`ClusterRejected`, raised before the reach timeout (30 s here) runs out."""
    if case == "certificate for another host":
        with secured_broker(tmp_path, cert=str(pki.elsewhere.cert), key=str(pki.elsewhere.key)) as front:
            checked = Security(SecurityProtocol.SSL, ssl_cafile=str(pki.ca.cafile))
            with pytest.raises(ClusterRejected, match=expected):
                await KafkaConnection(front.bootstrap_servers, checked).check_reachable(30)
            # unchecked, the same certificate is accepted: the trusted authority signed it
            unchecked = Security(SecurityProtocol.SSL, ssl_cafile=str(pki.ca.cafile), ssl_check_hostname=False)
            await KafkaConnection(front.bootstrap_servers, unchecked).check_reachable(30)
        return
    kafka = {
        "wrong password": lambda: KafkaConnection(sasl_ssl.bootstrap_servers, scram512(pki, "not-the-password")),
        "mechanism not offered": lambda: KafkaConnection(
            sasl_plaintext.bootstrap_servers,
            Security(
                SecurityProtocol.SASL_PLAINTEXT,
                sasl_mechanism=SaslMechanism.OAUTHBEARER,
                oauth_provider=OAuthProvider.FILE,
                oauth_token_file=__file__,
            ),
        ),
        "untrusted certificate": lambda: KafkaConnection(
            mutual_tls.bootstrap_servers, replace(mtls(pki), ssl_cafile=str(pki.rogue.cafile))
        ),
        "no client certificate": lambda: KafkaConnection(
            mutual_tls.bootstrap_servers, Security(SecurityProtocol.SSL, ssl_cafile=str(pki.ca.cafile))
        ),
        "plaintext client at a TLS listener": lambda: KafkaConnection(mutual_tls.bootstrap_servers),
    }[case]()
    with pytest.raises(ClusterRejected, match=expected):
        await kafka.check_reachable(30)


def security_env(security: Security) -> dict[str, str]:
    """``security`` as the worker's ``KAGENT_*`` settings (by name, as :class:`Worker` takes them)."""
    names = {"protocol": "security_protocol", "oauth_provider": "sasl_oauthbearer_provider"}
    env = {}
    for name, value in security.__dict__.items():
        if value is not None and value != getattr(Security(), name):
            env[names.get(name, name)] = value.value if hasattr(value, "value") else str(value)
    return env


class Simulation:
    """The simulator over ``kafka``, in a thread of its own with its own event loop, while the block runs."""

    def __init__(self, kafka: KafkaConnection, scenario: Scenario) -> None:
        self._kafka, self._scenario = kafka, scenario
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._main, name="simulator", daemon=True)

    def _main(self) -> None:
        async def simulate() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            self._started.set()
            await run_simulation(self._kafka, self._scenario, self._stop)

        try:
            asyncio.run(simulate())
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.errors.append(exc)
        finally:
            self._started.set()

    def __enter__(self) -> Simulation:
        self._thread.start()
        assert self._started.wait(30), "the simulator did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)
        assert not self._thread.is_alive(), "the simulator did not stop within 60 s"


@pytest.mark.parametrize("front_name", ["mutual_tls", "sasl_ssl"], ids=["SSL-mutual", "SASL_SSL-SCRAM-SHA-512"])
def test_a_worker_and_the_simulator_run_on_a_secured_cluster(
    front_name: str, pki: Pki, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The simulator's groups, topics, traffic and coordinator records, and a worker reading them: every
    connection of both (Faust's own, the source's and the end-offset poller's included) through TLS, and
    SASL for the second."""
    front: SecurityFront = request.getfixturevalue(front_name)
    if front_name == "mutual_tls":
        security = mtls(pki)
        settings = security_env(security)
    else:
        security = scram512(pki)
        password_file = tmp_path / "password"
        password_file.write_text(USERS["SCRAM-SHA-512"]["kagent"] + "\n")
        settings = {k: v for k, v in security_env(security).items() if k != "sasl_password"}
        settings["sasl_password_file"] = str(password_file)
    kafka = KafkaConnection(front.bootstrap_servers, security)
    group = f"secure-{front_name.replace('_', '-')}"
    scenario = Scenario(
        topics=(TopicSpec(f"{group}-orders", 2),),
        traffic=(TrafficSpec(f"{group}-orders", rate=50, keys=10),),
        groups=(GroupSpec(group, (f"{group}-orders",), "roundrobin", (MemberSpec("c0"), MemberSpec("c1"))),),
    )
    worker = Worker(front.bootstrap_servers, tmp_path, f"kagent-{front_name.replace('_', '-')}", **settings)
    with Simulation(kafka, scenario) as simulation:
        worker.start()
        try:

            def group_seen() -> bool:
                worker.check_alive()
                assert not simulation.errors, simulation.errors
                groups = (get_json(worker.url + "api/local/groups") or {}).get("groups", {})
                return len(groups.get(group, {}).get("member_lag", {})) == 2

            wait_until(group_seen, 120, f"the worker to hold {group} with its members")
            # the end-offset poller's own client got through too
            polls = 'kagent_end_offset_polls_total{outcome="ok"}'
            wait_until(lambda: (worker.metrics() or {}).get(polls, 0) > 0, 60, "a successful end-offset poll")
        finally:
            worker.stop()
    assert not simulation.errors, simulation.errors


@pytest.mark.parametrize("case", ["wrong password", "untrusted certificate"])
def test_a_refused_worker_stops_with_one_line_that_says_which(
    case: str, pki: Pki, sasl_ssl: SecurityFront, mutual_tls: SecurityFront, tmp_path: Path
) -> None:
    if case == "wrong password":
        broker, security = sasl_ssl.bootstrap_servers, scram512(pki, "not-the-password")
        expected = "rejected kagent's SASL credentials"
    else:
        broker, security = mutual_tls.bootstrap_servers, replace(mtls(pki), ssl_cafile=str(pki.rogue.cafile))
        expected = "its TLS certificate is not trusted"
    result = subprocess.run(
        [sys.executable, "-m", "kagent.tools.cli", "worker"],
        env=kagent_env(broker=broker, web_port=str(free_port()), data_dir=str(tmp_path), **security_env(security)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in (result.stdout + result.stderr).splitlines() if "not starting" in line]
    assert len(errors) == 1, result.stdout + result.stderr
    assert expected in errors[0] and "not-the-password" not in result.stdout + result.stderr
    assert "within 15 s" not in errors[0]  # refused at once, not after the reach timeout
