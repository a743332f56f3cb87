"""The compiled twins of the decoders: built, in use, and identical in
behaviour to the generated Python they are compiled from.

Every other codec test runs on whichever decoders are in use, which after
the README's install are the twins. Here the same inputs (valid records,
their mutations, random bytes, blobs) go through the pure-Python decoders in
a subprocess (`KAGENT_CODEC=python`) and through the twins in this one, and
every outcome must match: the same record, or a `DecodeError` with the same
record type, part, version, offset and reason.
"""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

from kagent.core.consumer_offsets import (
    DecodeError,
    Subscription,
    _native,
    decode,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from tests.unit.test_consumer_offsets_fuzz import ASG, ENCODED, KNOWN_TYPES, SUB, _mutations

ROOT = Path(__file__).resolve().parents[2]
Outcome = tuple[object, ...]


def test_every_decoder_runs_its_compiled_twin() -> None:
    assert _native.IN_USE, "kagent.core.consumer_offsets._twins was not built: run the README's install"
    stale = sorted(set(_native.TWINS) - _native.IN_USE)
    assert not stale, f"built twins are stale for {stale}: reinstall (pip install -e .) to rebuild them"


def _outcome(decoder: object, *args: object) -> Outcome:
    try:
        return ("record", decoder(*args))  # type: ignore[operator]
    except DecodeError as exc:
        return ("DecodeError", exc.record_type, exc.part, exc.version, exc.offset, exc.reason)
    except Exception as exc:  # noqa: BLE001 - any other exception is an outcome to compare
        return ("raised", type(exc).__name__, str(exc))


def _subscription(version: int) -> Subscription:
    """SUB with only the fields `version` has."""
    return SUB._replace(
        version=version,
        owned_partitions=SUB.owned_partitions if version >= 1 else None,
        generation_id=SUB.generation_id if version >= 2 else None,
        rack_id=SUB.rack_id if version >= 3 else None,
    )


def outcomes() -> list[Outcome]:
    """The outcome of decoding every input of the corpus, in order."""
    rng = random.Random(20261121)
    results: list[Outcome] = []
    for key, value in ENCODED:
        assert value is not None
        results += [_outcome(decode, key, value), _outcome(decode, key, None)]
        for _ in range(40):
            results += [_outcome(decode, key, mutated) for mutated in _mutations(value, rng)]
            for mutated in _mutations(key, rng):
                results += [_outcome(decode, mutated, value), _outcome(decode, mutated, None)]
    for record_type in KNOWN_TYPES:
        for _ in range(300):
            key = record_type.to_bytes(2, "big") + rng.randbytes(rng.randrange(24))
            value = rng.randrange(6).to_bytes(2, "big") + rng.randbytes(rng.randrange(120))
            results.append(_outcome(decode, key, value))
    blobs = [
        *((decode_subscription, encode_subscription(_subscription(version))) for version in range(4)),
        *((decode_assignment, encode_assignment(ASG._replace(version=version))) for version in range(4)),
    ]
    for decoder, data in blobs:
        results.append(_outcome(decoder, data))
        for _ in range(200):
            results += [_outcome(decoder, mutated) for mutated in _mutations(data, rng)]
    return results


def test_twins_decode_exactly_as_the_generated_python() -> None:
    pure = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import pickle, sys\n"
                "from kagent.core.consumer_offsets import _native\n"
                "from tests.unit.test_consumer_offsets_native import outcomes\n"
                "assert not _native.IN_USE, 'KAGENT_CODEC=python left twins in use'\n"
                "sys.stdout.buffer.write(pickle.dumps(outcomes()))\n"
            ),
        ],
        cwd=ROOT,
        env={**os.environ, _native.CODEC_VARIABLE: "python"},
        capture_output=True,
        check=True,
        timeout=300,
    )
    expected: list[Outcome] = pickle.loads(pure.stdout)
    actual = outcomes()
    assert len(actual) == len(expected) > 40_000
    kinds = {outcome[0] for outcome in expected}
    assert kinds == {"record", "DecodeError"}, kinds
    mismatches = [(index, e, a) for index, (e, a) in enumerate(zip(expected, actual, strict=True)) if e != a]
    assert not mismatches, f"{len(mismatches)} outcomes differ; first (index, python, twin): {mismatches[0]}"
