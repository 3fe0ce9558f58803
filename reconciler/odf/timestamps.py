"""Nanosecond-exact RFC 3339 timestamps.

ODF blocks carry system times with nanosecond precision (the reference writes
``Utc::now()``), and the block hash covers every nanosecond. Python's ``datetime``
stops at microseconds, so blocks keep time as whole seconds since the epoch plus
nanoseconds, and convert to ``datetime`` only where a caller wants one.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(Z|z|[+-]\d{2}:\d{2})$"
)
_NANOS = 1_000_000_000


@cache
def _year_start(year: int) -> int:
    """Seconds from the epoch to 1 January of ``year`` (every block's times are decoded
    through this, and a chain spans few years). Raises for a year ``datetime`` refuses."""
    return int((dt.datetime(year, 1, 1, tzinfo=dt.UTC) - _EPOCH).total_seconds())


@dataclass(frozen=True, order=True, slots=True)
class Timestamp:
    """A UTC instant: ``seconds`` since the Unix epoch and ``nanos`` within that second."""

    seconds: int
    nanos: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.nanos < _NANOS:
            raise ValueError(f"nanoseconds must be within [0, 1e9), got {self.nanos}")

    @classmethod
    def parse(cls, text: str) -> Timestamp:
        """Parse RFC 3339 with up to nine fractional digits and any UTC offset."""
        m = _RFC3339.match(text)
        if m is None:
            raise ValueError(
                f"expected an RFC 3339 timestamp like 2020-01-01T12:00:00Z, got {text!r}"
            )
        year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
        fraction, offset = m.group(7), m.group(8)
        try:
            naive = dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)
        except ValueError as e:
            raise ValueError(f"invalid timestamp {text!r}: {e}") from None
        seconds = int((naive - _EPOCH).total_seconds())
        if offset not in ("Z", "z"):
            sign = 1 if offset[0] == "+" else -1
            seconds -= sign * (int(offset[1:3]) * 3600 + int(offset[4:6]) * 60)
        nanos = int(fraction.ljust(9, "0")) if fraction else 0
        return cls(seconds, nanos)

    @classmethod
    def from_datetime(cls, value: dt.datetime) -> Timestamp:
        """Convert an aware ``datetime`` (naive ones are taken as UTC)."""
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        delta = value - _EPOCH
        return cls(delta.days * 86400 + delta.seconds, delta.microseconds * 1000)

    @classmethod
    def from_epoch_nanos(cls, nanos: int) -> Timestamp:
        return cls(*divmod(nanos, _NANOS))

    @classmethod
    def from_fields(
        cls, year: int, ordinal: int, seconds_from_midnight: int, nanos: int
    ) -> Timestamp:
        """Build from the FlatBuffers ``Timestamp`` struct (day-of-year form)."""
        return cls(_year_start(year) + (ordinal - 1) * 86400 + seconds_from_midnight, nanos)

    @classmethod
    def now(cls) -> Timestamp:
        import time

        return cls.from_epoch_nanos(time.time_ns())

    def to_fields(self) -> tuple[int, int, int, int]:
        """The FlatBuffers struct fields: year, ordinal day, seconds from midnight, nanos."""
        days, secs = divmod(self.seconds, 86400)
        date = (_EPOCH + dt.timedelta(days=days)).date()
        return date.year, date.timetuple().tm_yday, secs, self.nanos

    def to_datetime(self) -> dt.datetime:
        """An aware ``datetime``; sub-microsecond digits are truncated."""
        return _EPOCH + dt.timedelta(seconds=self.seconds, microseconds=self.nanos // 1000)

    @property
    def epoch_nanos(self) -> int:
        return self.seconds * _NANOS + self.nanos

    @property
    def epoch_millis(self) -> int:
        return self.seconds * 1000 + self.nanos // 1_000_000

    def isoformat(self) -> str:
        """RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits, as few as keep it exact."""
        t = _EPOCH + dt.timedelta(seconds=self.seconds)
        # Not strftime: its %Y does not zero-pad years before 1000 on every platform.
        base = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
        n = self.nanos
        if n == 0:
            frac = ""
        elif n % 1_000_000 == 0:
            frac = f".{n // 1_000_000:03d}"
        elif n % 1000 == 0:
            frac = f".{n // 1000:06d}"
        else:
            frac = f".{n:09d}"
        return f"{base}{frac}Z"

    def __str__(self) -> str:
        return self.isoformat()

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _coerce_timestamp,
            serialization=core_schema.plain_serializer_function_ser_schema(
                Timestamp.isoformat, when_used="json"
            ),
        )


def _coerce_timestamp(value: Any) -> Timestamp:
    if isinstance(value, Timestamp):
        return value
    if isinstance(value, str):
        return Timestamp.parse(value)
    if isinstance(value, dt.datetime):
        return Timestamp.from_datetime(value)
    raise ValueError(f"expected an RFC 3339 timestamp string, got {type(value).__name__}")
