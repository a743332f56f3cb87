"""The data contracts: JSON Schemas of every table value and topic record kagent writes.

:func:`schemas` derives them from the pydantic models (in serialization
mode: what kagent writes);
:func:`write_schemas` writes them as ``<name>.schema.json`` files, the
checked-in ``tables/`` folder that subscribers in any language and the Spark
pipeline read. Also defines :class:`DeadLetter`, the record of the
dead-letter topic.

Pure except :func:`write_schemas`, which writes files.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from kagent.core.committed_offset import CommittedOffset
from kagent.core.consumer_group_state import ConsumerGroupState
from kagent.core.evaluation import EvaluationState
from kagent.core.events import DerivedEventsRecord, GroupAssigned
from kagent.core.incidents import IncidentsState, IncidentTransition
from kagent.core.recommendation import RecentRecommendations, Recommendation
from kagent.core.snapshot import PartitionLag

__all__ = ["CONTRACTS", "SCHEMA_SUFFIX", "Contract", "DeadLetter", "schema_text", "schemas", "write_schemas"]

SCHEMA_SUFFIX = ".schema.json"
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class DeadLetter(BaseModel):
    """A record kagent could not apply or deliver, with its raw bytes and why (dead-letter topic record): a
    ``__consumer_offsets`` record that does not decode or breaks a rule of :mod:`kagent.core.record_checks`,
    a derived-events or incidents record that is not what its topic carries, or an incident transition an
    alert sink rejected for good."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    topic: str
    """The topic the record was read from."""
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    timestamp: int | None
    """The record's timestamp, milliseconds since the epoch; None when it has none."""
    error: str
    """Why: where decoding stopped (record type, part, version, byte and reason), the rule the record
    broke with the field and its value (``OffsetCommit breaks partition-negative: partition = -1 ...``),
    or the sink that rejected it with its answer (``alert sink pagerduty rejected it: ... 400 ...``)."""
    key: str | None = Field(json_schema_extra={"contentEncoding": "base64"})
    """The record key's bytes, base64 (RFC 4648, standard alphabet, padded); None for a null key."""
    value: str | None = Field(json_schema_extra={"contentEncoding": "base64"})
    """The record value's bytes, base64; None for a null value (a tombstone)."""

    @classmethod
    def from_record(
        cls,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        error: str,
    ) -> DeadLetter:
        """The dead letter of a record, its key and value bytes encoded base64."""
        return cls(
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp=timestamp,
            error=error,
            key=_base64(key),
            value=_base64(value),
        )


def _base64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


class Contract(NamedTuple):
    """One table value or topic record: its title, its type and where kagent writes it."""

    title: str
    type: Any
    where: str


CONTRACTS: Mapping[str, Contract] = {
    "derived-events": Contract(
        "DerivedEventsRecord",
        DerivedEventsRecord,
        "Record of the derived-events topic: the events of groups of its partition, each group's oldest first, "
        "packed in an array (no key), or one group's (keyed by group); `kind` tells which event.",
    ),
    "committed-offset": Contract(
        "CommittedOffset",
        CommittedOffset,
        "Value of the committed-offsets table (version 2), keyed by group-partition: the group's last commit "
        "on the partition and its recent commits, for its health check.",
    ),
    "assignment": Contract(
        "GroupAssigned", GroupAssigned, "Value of the assignment table, keyed by group: its generation and members."
    ),
    "partition-lag": Contract(
        "PartitionLag", PartitionLag, "Value of the partition-lag table: a group's lag on a partition."
    ),
    "consumer-group-state": Contract(
        "ConsumerGroupState",
        ConsumerGroupState,
        "Value of the consumer-group-state table, keyed by group: a KIP-848 group folded from its records.",
    ),
    "evaluation-state": Contract(
        "EvaluationState", EvaluationState, "Value of the evaluation-state table, keyed by group."
    ),
    "recommendation": Contract(
        "Recommendation", Recommendation, "Record of the kagent-recommendations topic, keyed by group."
    ),
    "recent-recommendations": Contract(
        "RecentRecommendations",
        RecentRecommendations,
        "Value of the recent-recommendations table, keyed by group: its latest recommendations, newest first "
        "(what the HTTP API serves at /api/recommendations).",
    ),
    "incident": Contract(
        "IncidentTransition",
        IncidentTransition,
        "Record of the <app id>-incidents topic, keyed by group: an incident opens, updates or resolves; "
        "the alerting stage delivers it to the configured sinks.",
    ),
    "incidents-state": Contract(
        "IncidentsState",
        IncidentsState,
        "Value of the incidents table, keyed by group: its open incidents and the transitions still to send.",
    ),
    "dead-letter": Contract(
        "DeadLetter",
        DeadLetter,
        "Record of the dead-letter topic: a record kagent could not apply (from __consumer_offsets, the "
        "derived events or the incidents) or an alert sink rejected, and why.",
    ),
}
"""Every contract by name (its file is ``<name>.schema.json``)."""


def schemas() -> dict[str, dict[str, Any]]:
    """File name (``<name>.schema.json``) to JSON Schema (draft 2020-12), for every contract."""
    return {
        name + SCHEMA_SUFFIX: {
            **TypeAdapter(contract.type).json_schema(mode="serialization"),
            "$schema": JSON_SCHEMA_DIALECT,
            "$comment": contract.where,
            "title": contract.title,
        }
        for name, contract in CONTRACTS.items()
    }


def schema_text(schema: Mapping[str, Any]) -> str:
    """How a schema file reads: sorted keys, 2-space indent, a trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_schemas(directory: Path) -> list[Path]:
    """Write every schema into ``directory`` (created if missing) and delete ``*.schema.json`` files
    there that no contract has any more; return the paths written, sorted."""
    directory.mkdir(parents=True, exist_ok=True)
    generated = schemas()
    for stale in directory.glob("*" + SCHEMA_SUFFIX):
        if stale.name not in generated:
            stale.unlink()
    written = []
    for name, schema in sorted(generated.items()):
        path = directory / name
        path.write_text(schema_text(schema), encoding="utf-8")
        written.append(path)
    return written
