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

from collections.abc import Iterable

import faust
from faust.types import TopicT

__all__ = ["prepare_output_topics"]


async def prepare_output_topics(app: faust.App, topics: Iterable[TopicT], tables: Iterable[faust.Table]) -> None:
    """Create ``topics`` if missing, and have the producer track them and ``tables``' changelogs."""
    names = []
    for topic in topics:
        await topic.maybe_declare()
        names.append(topic.get_topic_name())
    names += [table.changelog_topic.get_topic_name() for table in tables]
    producer = app.producer
    await producer.maybe_start()
    client = producer._ensure_producer().client  # Faust exposes no public handle on aiokafka's client
    for name in names:
        client.add_topic(name)
