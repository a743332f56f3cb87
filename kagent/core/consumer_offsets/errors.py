"""The one exception the decoder raises for malformed bytes."""

from __future__ import annotations


class DecodeError(ValueError):
    """Bytes that are not a valid record (or consumer-protocol blob).

    Attributes say where decoding stopped: `record_type` (None for a
    standalone consumer-protocol blob or a key too short to hold one),
    `part` ("key", "value", "subscription" or "assignment"), `version` (the
    value or blob version, None if it could not be read), `offset` (byte
    offset into that part) and `reason`.
    """

    def __init__(self, record_type: int | None, part: str, version: int | None, offset: int, reason: str) -> None:
        self.record_type = record_type
        self.part = part
        self.version = version
        self.offset = offset
        self.reason = reason
        where = "" if record_type is None else f"record type {record_type}, "
        version_text = "" if version is None else f" version {version}"
        super().__init__(f"{where}{part}{version_text}, byte {offset}: {reason}")

    def __reduce__(self) -> tuple[type[DecodeError], tuple[int | None, str, int | None, int, str]]:
        return (DecodeError, (self.record_type, self.part, self.version, self.offset, self.reason))


class Malformed(Exception):
    """Raised inside compiled decoders with the offending byte offset; the
    decoder's entry point turns it into a `DecodeError` with its context."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(offset, reason)
        self.offset = offset
        self.reason = reason
