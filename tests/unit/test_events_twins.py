"""The derived events' compiled twins (kagent/core/_events_twins.pyx): built, in use, and returning exactly
what their Python functions return for the same arguments (the module's contract).

Every other test of ingest and of reading derived events runs on whichever is in use, which after the
README's install are the twins; here the same generated arguments go through both. For the source's
ingest, batches of: offset commits of every record type and value version with
any field values (the twin reads those in place), the same with bytes flipped, cut or added, and every
other kind of record, malformed ones included (the twin hands those to the Python step). For storage's
check of a commit run, lists of any JSON values. For storage's per-commit path, the committed-offsets table's
key of any names and partition, and the gathering of a group's commit runs between its other events.
"""

from __future__ import annotations

import gc
import subprocess
import sys

from aiokafka.partitioner import murmur2
from aiokafka.structs import ConsumerRecord, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

import kagent.core.collector
import kagent.core.ingest
from kagent.core import _events_twins, events, lag_twins, table_keys
from kagent.core.consumer_offsets import OffsetCommit, encode
from kagent.core.ingest import Ingested, _ingest, ingest
from tests.unit.test_ingest import INT32, INT64, RECORDS, Fetched, mutated
from tests.unit.test_simulator_placement import KAFKA_MURMUR2

NAMES = st.one_of(
    st.sampled_from(["billing", "orders", "orders.v2", "a-b_c", ".", "..", "", "a" * 249, "a" * 250, "héllo", "x y"]),
    st.text(max_size=6),
)
METADATA = st.one_of(st.just(""), st.sampled_from(["{}", "é", "m" * 126, "m" * 127, "m" * 300]), st.text(max_size=4))


@st.composite
def commits(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """An offset commit of record type 0 or 1 and value version 0-4, with any values its fields hold."""
    version = draw(st.integers(0, 4))
    record = OffsetCommit(
        draw(NAMES),
        draw(NAMES),
        draw(st.one_of(st.integers(-2, 3), INT32)),
        draw(st.one_of(st.integers(-3, 3), INT64)),
        draw(METADATA),
        draw(st.one_of(st.just(1_700_000_000_000), INT64)),
        draw(st.one_of(st.just(-1), INT64)) if version == 1 else None,
        draw(st.one_of(st.none(), st.integers(-3, 3), INT32.filter(lambda epoch: epoch != -1)))
        if version >= 3
        else None,
        version,
        draw(st.sampled_from([0, 1])),
    )
    key, value = encode(record)
    assert value is not None
    return key, value


@st.composite
def tagged(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A commit of value version 4 with tagged fields (read by the Python step)."""
    key, value = draw(commits().filter(lambda commit: commit[1][:2] == b"\x00\x04"))
    return key, value[:-1] + draw(st.sampled_from([b"\x01\x00\x00", b"\x01\x05\x01x", b"\x01\x00\x05"]))


def _seen(result: Ingested[Fetched]) -> tuple[object, ...]:
    """What a result says, comparable: each group's events, and each malformed record with its error's
    type and reason."""
    return (
        [(events.group, events.events) for events in result.events],
        [(record.offset, type(error), str(error)) for record, error in result.malformed],
    )


def test_ingest_and_the_runs_check_run_their_compiled_twins() -> None:
    assert ingest is _events_twins.ingest, "run the README's install to build them"
    assert kagent.core.ingest.ingest is not _ingest
    assert events.plain_run is _events_twins.plain_run
    assert table_keys.murmur2 is _events_twins.murmur2
    assert table_keys.partition_key is _events_twins.partition_key
    assert events.gathered_runs is _events_twins.gathered_runs
    assert kagent.core.collector.untrack is _events_twins.untrack
    assert {"ingest", "plain_run", "murmur2", "partition_key", "gathered_runs", "untrack"} <= lag_twins.IN_USE


@settings(max_examples=600)
@given(
    st.lists(st.one_of(commits(), mutated(commits()), tagged(), RECORDS), max_size=12),
    st.sampled_from([(), ("billing",), ("billing", "x y", "")]),
)
def test_the_twin_returns_what_the_python_function_returns(
    batch: list[tuple[bytes | None, bytes | None]], skip: tuple[str, ...]
) -> None:
    records = [Fetched(key, value, offset) for offset, (key, value) in enumerate(batch)]

    assert _seen(ingest(records, frozenset(skip))) == _seen(_ingest(records, frozenset(skip)))


def test_a_groups_commits_between_records_read_by_python_stay_in_their_runs() -> None:
    def commit(group: str, partition: int, offset: int, version: int = 3) -> Fetched:
        epoch = 5 if version >= 3 else None
        key, value = encode(OffsetCommit(group, "orders", partition, offset, "", 7, None, epoch, version))
        return Fetched(key, value, offset)

    epoch = commit("billing", 0, 3)
    epoch = Fetched(epoch.key, epoch.value.replace(b"\x00\x00\x00\x05", b"\xff\xff\xff\xfe"), 3)  # epoch -2
    key, value = encode(OffsetCommit("billing", "orders", 0, 5, "é", 7, None, None, 2))
    metadata = Fetched(key, value.replace("é".encode(), b"\xc3\x28"), 5)  # not UTF-8: read by no field of a run
    records = [commit("billing", 0, 1), commit("billing", 0, 2, 4), epoch, commit("billing", 1, 4, 0), metadata]

    twin, python = ingest(records, ()), _ingest(records, ())

    assert _seen(twin) == _seen(python)
    ((group, events),), ((first, _, epoch_reason), (second, _, metadata_reason)) = _seen(twin)
    assert group == "billing"
    assert events == (["orders", 0, 1, 7, 5, 2, 7, 5], ["orders", 1, 4, 7, None])
    assert first == 3 and "leader_epoch = -2" in epoch_reason
    assert second == 5 and "invalid UTF-8" in metadata_reason


def test_the_twin_reads_plain_commits_itself_and_hands_the_rest_to_the_python() -> None:
    """Which path each record takes, seen in a fresh interpreter whose Python step refuses every call (the
    twin looks it up at its first call): a plainly valid commit of every record type and value version is
    read without it; a tombstone and a commit with tagged fields are not."""
    plain = [
        encode(OffsetCommit("billing", "orders", 1, 5, "m", 7, -1 if version == 1 else None, epoch, version, kind))
        for version in range(5)
        for kind in (0, 1)
        for epoch in ((None, 3) if version >= 3 else (None,))
    ]
    key, value = plain[-1]
    others = [(key, None), (key, value[:-1] + b"\x01\x00\x00")]
    script = f"""
from kagent.core import _events_twins, ingest

def refuse(*args, **kwargs):
    raise LookupError("handed to the Python")

class Fetched:
    def __init__(self, key, value):
        self.key, self.value = key, value

ingest._ingest_one = refuse
assert len(_events_twins.ingest([Fetched(*kv) for kv in {plain!r}], ()).events) == 1
for kv in {others!r}:
    try:
        _events_twins.ingest([Fetched(*kv)], ())
    except LookupError:
        continue
    raise AssertionError(f"the twin read {{kv!r}} itself")
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


JSON_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=600)
@given(
    st.one_of(
        st.lists(JSON_VALUES, max_size=11),
        st.tuples(
            st.sampled_from(["orders", 7]), st.sampled_from([0, 3, -1, True]), st.lists(INT64, min_size=3, max_size=9)
        ).map(lambda run: [run[0], run[1], *run[2]]),
    )
)
def test_the_runs_twin_gives_the_python_functions_verdict(item: list[object]) -> None:
    assert _events_twins.plain_run(item) is events._plain_run(item)


def test_the_runs_twin_refuses_what_the_python_refuses() -> None:
    plain = ["orders", 0, 5, 7, None, 6, 7, 3]
    assert _events_twins.plain_run(plain) is True
    for broken in (
        plain[:-1],  # not five fields and three per commit more
        ["orders", -1, 5, 7, None],  # a negative partition
        ["orders", True, 5, 7, None],  # a bool is not an int in JSON
        [b"orders", 0, 5, 7, None],
        ["orders", 0, 5.0, 7, None],
        ["orders", 0, 5, 7, "3"],
    ):
        assert _events_twins.plain_run(broken) is False, broken


@settings(max_examples=600)
@given(st.one_of(st.binary(max_size=70), st.text(max_size=30).map(str.encode)))
def test_the_murmur2_twin_gives_aiokafkas_hash(data: bytes) -> None:
    assert _events_twins.murmur2(data) == murmur2(data)


def test_the_murmur2_twin_places_keys_as_kafka_does() -> None:
    for key, signed in KAFKA_MURMUR2.items():  # Kafka's own UtilsTest.testMurmur2, as unsigned hashes
        assert _events_twins.murmur2(key) == signed & 0xFFFFFFFF, key
    assert _events_twins.murmur2(bytearray(b"21")) == murmur2(b"21")  # not bytes: aiokafka's


KEY_NAMES = st.one_of(
    NAMES,
    st.sampled_from(['a"b', "a\\b", "a\nb", "a\x7fb", "a\x00", "\ud800", "日本"]),
    st.text(st.characters(max_codepoint=0x80), max_size=8),
)


@settings(max_examples=600)
@given(KEY_NAMES, KEY_NAMES, st.one_of(st.integers(0, 3), INT32, st.integers(-3, 10**19), st.booleans()))
def test_the_key_twin_writes_the_python_functions_key(group: str, topic: str, partition: int) -> None:
    assert _events_twins.partition_key(group, topic, partition) == table_keys._partition_key(group, topic, partition)


def test_the_key_twin_writes_plain_names_itself_and_escapes_as_json_does() -> None:
    assert _events_twins.partition_key("billing", "orders", 12) == '["billing","orders",12]'
    assert _events_twins.partition_key("", "t", 0) == '["","t",0]'
    assert _events_twins.partition_key('a"b', "t", 1) == '["a\\"b","t",1]'  # the Python's way: escaped
    assert _events_twins.partition_key("é", "t", 1) == '["é","t",1]'  # as json.dumps(ensure_ascii=False)


RUNS = st.lists(
    st.tuples(st.sampled_from(["orders", "billing"]), st.integers(0, 2), st.lists(INT64, min_size=3, max_size=6)).map(
        lambda run: [run[0], run[1], *run[2]]
    ),
    max_size=6,
)


@settings(max_examples=400)
@given(
    st.lists(st.one_of(RUNS.map(tuple), st.just(("event",))), max_size=4).map(
        lambda parts: tuple(item if isinstance(item, list) else {"kind": "other"} for part in parts for item in part)
    ),
    st.integers(0, 3),
    st.sampled_from([{}, {TopicPartition("orders", 0): [1, 2, None]}]),
)
def test_the_runs_gathering_twin_gathers_as_the_python_does(
    group_events: tuple[object, ...], start: int, before: dict[TopicPartition, list[object]]
) -> None:
    twin = {tp: list(fields) for tp, fields in before.items()}
    python = {tp: list(fields) for tp, fields in before.items()}

    at = _events_twins.gathered_runs(group_events, start, twin)

    assert at == events._gathered_runs(group_events, start, python)  # type: ignore[arg-type]
    assert twin == python
    assert list(twin) == list(python)  # the partitions in the same order
    assert all(type(tp) is TopicPartition for tp in twin)


def test_the_runs_gathering_twin_leaves_what_it_adds_out_of_the_collectors_watch() -> None:
    """A partition's key and fields hold only a name and numbers (never in a cycle): a batch's tens of
    thousands of them are not gone over by each young collection while the batch is applied. A
    partition gathered before (here, by the caller) keeps its own list, extended."""
    before = [1, 2, None]
    commits: dict[TopicPartition, list[object]] = {TopicPartition("orders", 0): before}
    runs = (["orders", 0, 3, 4, None], ["billing", 1, 5, 6, 7])

    assert _events_twins.gathered_runs(runs, 0, commits) == 2

    added = TopicPartition("billing", 1)
    assert commits == {TopicPartition("orders", 0): [1, 2, None, 3, 4, None], added: [5, 6, 7]}
    assert commits[TopicPartition("orders", 0)] is before
    (key,) = [tp for tp in commits if tp == added]
    assert not gc.is_tracked(key) and not gc.is_tracked(commits[added])


def test_the_fetched_records_twin_leaves_them_out_of_the_collectors_watch() -> None:
    """aiokafka's records of a fetch are left out of the young collections that run while they wait to be
    sent; what the collector never watches (an int) is passed over; the Python function, which cannot
    untrack, leaves each as it was. Either way the records are the same."""
    fetched = [
        ConsumerRecord("__consumer_offsets", 0, n, 1_700_000_000_000, 0, b"k", b"v", None, 1, 1, ()) for n in range(3)
    ]
    kept = list(fetched)
    python: list[object] = [ConsumerRecord("__consumer_offsets", 0, 0, 0, 0, None, None, None, 0, 0, ()), 7]

    kagent.core.collector._untrack(python)
    _events_twins.untrack([*fetched, 7, "text", None])

    assert fetched == kept and all(a is b for a, b in zip(fetched, kept, strict=True))
    assert not any(gc.is_tracked(record) for record in fetched)
    assert gc.is_tracked(python[0])
