"""The alerting stage outlives its consumer: a cluster that is away when the stage starts, then comes.

The stage runs in the test's process, built as the app builds it but without a worker around it,
so that its consumer can meet a cluster that is not there yet: a real broker started later on the
port it was given.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from kagent.connections import KafkaConnection
from kagent.core.alert_config import load_alerts_config
from kagent.core.incidents import Incident
from kagent.tools.embedded import EmbeddedBroker, free_port
from kagent.worker.alerting import Alerting
from kagent.worker.metrics import Metrics
from tests.support.incidents import lifecycle, publish_transitions, transition_key
from tests.support.receiver import Receiver
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.integration


class NoOpenIncidents:
    """The evaluator's read interface, with nothing open (this test re-sends nothing)."""

    def open_incidents(self) -> list[Incident]:
        return []


async def test_a_stage_started_before_its_cluster_delivers_once_the_cluster_comes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there yet
    with Receiver() as receiver:
        config = tmp_path / "alerts.yaml"
        config.write_text(
            "retry:\n  initial_backoff: 0.2\n  max_backoff: 1\n"
            f"sinks:\n  - name: hook\n    type: webhook\n    url: {receiver.url}/hook\n"
        )
        stage = Alerting(
            kafka=KafkaConnection(f"127.0.0.1:{port}"),
            group_id="recovery-alerting",
            incidents_topic="recovery-incidents",
            config=load_alerts_config(config),
            cluster_name="c",
            web_url="http://127.0.0.1:1",
            open_incidents=NoOpenIncidents(),
            dead_letters=None,  # type: ignore[arg-type]  # nothing is rejected here
            metrics=Metrics(),
        )
        with caplog.at_level(logging.ERROR, logger="kagent.worker.alerting"):
            await stage.start()
            try:

                async def failed_once() -> bool:
                    return any("incidents consumer failed" in r.getMessage() for r in caplog.records)

                await wait_until_async(failed_once, 60, "the consumer to fail without its cluster")
                with EmbeddedBroker(port=port) as broker:
                    # The topic is not created here: the stage's consumer may ask for it first (Tansu then
                    # creates it), and the producer below creates it otherwise.
                    sent = lifecycle("recovery-group", 5_000_000.0)
                    await publish_transitions(broker.bootstrap_servers, "recovery-incidents", sent)

                    async def delivered() -> bool:
                        keys = [transition_key(t) for t in sent]
                        got = [p.json() for p in receiver.posted if p.status == 202]
                        got_keys = [(g["incident"]["id"], g["action"], g["incident"]["updated_at"]) for g in got]
                        # and the stage counted each (seen behind the sink by a moment with four test processes on a
                        # busy machine: the stage counts a delivery once it has the answer, after the sink has it)
                        return all(key in got_keys for key in keys) and stage.delivered >= len(sent)

                    await wait_until_async(delivered, 90, "the transitions at the sink once the cluster came")
            finally:
                await stage.stop()
        assert stage.delivered >= len(sent)
