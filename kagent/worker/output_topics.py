"""The topics kagent writes: created at start, and kept in the producer's metadata.

Two traps this module closes, both seen on the embedded broker and both
possible on any cluster:

- Faust creates the topics its agents read and its tables' changelogs, not
  a topic it is only asked to send to. The recommendations and dead-letter
  topics were left to the broker's auto-creation, which production clusters
  usually turn off (``auto.create.topics.enable=false``): their first send
  would wait out the producer's request timeout. They are declared here.
- aiokafka's producer asks the cluster's metadata for the topics it tracks
  only, once it tracks any, and tracks a topic only when a send finds it
  unknown. A topic it knew from its bootstrap (all topics) drops out of the
  metadata at the first refresh after a new topic is sent to (the first dead
  letter, say); a batch of it already waiting in the accumulator then has no
  leader, is never sent, and every later send to that partition waits for
  it: storage's changelog flush hung for the producer's 20-minute request
  timeout. Every topic kagent writes is tracked from the start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

import faust
from faust.exceptions import NotReady
from faust.types import TopicT

__all__ = ["prepare_output_topics"]

log = logging.getLogger(__name__)


DECLARE_TIMEOUT = 10.0
"""Seconds creating one topic at start may take before it is left to its first send."""


async def prepare_output_topics(app: faust.App, topics: Iterable[TopicT], tables: Iterable[faust.Table]) -> None:
    """Create ``topics`` if missing, then have the producer track them and ``tables``' changelogs
    (in that order: a metadata request for a missing topic auto-creates it, where the cluster
    allows, with the broker's partition count). A topic that cannot be created now (the cluster
    is unreachable, say) is logged and left to its first send. Does nothing once the worker stops."""
    topics = list(topics)
    for topic in topics:
        try:
            async with asyncio.timeout(DECLARE_TIMEOUT):
                await topic.maybe_declare()
        except Exception as exc:  # noqa: BLE001 -- a broker gone at start must not crash the worker
            log.warning(
                "topic %s not created at start (%r): its first send creates it, if the cluster allows",
                topic.get_topic_name(),
                exc,
            )
    if app.should_stop:  # a SIGTERM during start-up: the producer is stopping
        return
    producer = app.producer
    await producer.maybe_start()
    try:
        client = producer._ensure_producer().client  # Faust exposes no public handle on aiokafka's client
    except NotReady:  # stopped meanwhile
        return
    for name in [topic.get_topic_name() for topic in topics] + [t.changelog_topic.get_topic_name() for t in tables]:
        client.add_topic(name)
