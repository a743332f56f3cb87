"""`kagent.tools.simulator.partitioners`: Java's String.hashCode, Kafka's group partition rule, murmur2 keys."""

from __future__ import annotations

import pytest
from aiokafka.partitioner import murmur2
from hypothesis import given
from hypothesis import strategies as st

from kagent.tools.simulator.partitioners import java_abs, java_string_hash_code, key_partition, offsets_partition_for


@pytest.mark.parametrize(
    ("text", "hash_code"),
    [
        ("", 0),
        ("a", 97),
        ("ab", 97 * 31 + 98),  # 3105
        ("abc", (97 * 31 + 98) * 31 + 99),  # 96354
        # g=103 r=114 o=111 u=117 p=112: 3193+114=3307; 102517+111=102628; 3181468+117=3181585; 98629135+112
        ("group", 98629247),
        # U+1F600 is the UTF-16 surrogates D83D DE00: 55357 * 31 + 56832
        ("\U0001f600", 1772899),
        # the classic string whose Java hashCode is Integer.MIN_VALUE
        ("polygenelubricants", -(2**31)),
    ],
)
def test_java_string_hash_code_known_values(text: str, hash_code: int) -> None:
    assert java_string_hash_code(text) == hash_code


def _by_definition(text: str) -> int:
    """s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a Java int."""
    units = text.encode("utf-16-be", "surrogatepass")
    codes = [units[i] << 8 | units[i + 1] for i in range(0, len(units), 2)]
    total = sum(code * 31 ** (len(codes) - 1 - i) for i, code in enumerate(codes)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(max_size=40))
def test_java_string_hash_code_is_the_polynomial_wrapped_to_an_int(text: str) -> None:
    assert java_string_hash_code(text) == _by_definition(text)


@pytest.mark.parametrize(("number", "absolute"), [(-(2**31), 0), (-10, 10), (10, 10), (0, 0), (-1, 1)])
def test_java_abs_as_kafka_utils_test(number: int, absolute: int) -> None:
    assert java_abs(number) == absolute


def test_offsets_partition_for_known_groups() -> None:
    assert offsets_partition_for("group") == 98629247 % 50 == 47
    assert offsets_partition_for("group", 7) == 98629247 % 7
    # Integer.MIN_VALUE: Utils.abs gives 0, so partition 0 whatever the count
    assert offsets_partition_for("polygenelubricants") == 0
    assert offsets_partition_for("polygenelubricants", 7) == 0
    assert offsets_partition_for("\U0001f600") == 1772899 % 50


@given(st.text(max_size=30), st.integers(min_value=1, max_value=200))
def test_offsets_partition_for_is_in_range(group: str, partitions: int) -> None:
    assert 0 <= offsets_partition_for(group, partitions) < partitions


def test_offsets_partition_for_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        offsets_partition_for("group", 0)


# Kafka's own UtilsTest.testMurmur2 vectors (Java ints).
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "java_hash"), KAFKA_MURMUR2.items())
def test_aiokafka_murmur2_matches_kafka(key: bytes, java_hash: int) -> None:
    assert murmur2(key) == java_hash & 0xFFFFFFFF


@pytest.mark.parametrize(("key", "java_hash"), KAFKA_MURMUR2.items())
@pytest.mark.parametrize("partitions", [1, 3, 6, 12, 50])
def test_key_partition_is_javas_built_in_partitioner(key: bytes, java_hash: int, partitions: int) -> None:
    # BuiltInPartitioner.partitionForKey: Utils.toPositive(murmur2(key)) % numPartitions
    assert key_partition(key, partitions) == (java_hash & 0x7FFFFFFF) % partitions
