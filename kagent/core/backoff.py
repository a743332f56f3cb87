"""How long to wait before trying a delivery again: capped exponential backoff with jitter.

The alerting stage tries a transition again, for as long as it takes, when a
sink answers 429 or 5xx or cannot be reached. :func:`backoff_delay` says how
long it waits before each retry, from the ``retry:`` section of the alerting
file (:class:`RetryPolicy`), the retry's number, a random draw and the
server's ``Retry-After`` if it sent one (:func:`parse_retry_after`).

Pure: no I/O, no clock, no randomness of its own (the caller draws).
"""

from __future__ import annotations

import math
from datetime import UTC
from email.utils import parsedate_to_datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["RetryPolicy", "backoff_delay", "parse_retry_after"]


class RetryPolicy(BaseModel):
    """The ``retry:`` section of the alerting file; every field is optional. Durations in seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    initial_backoff: float = Field(default=0.5, gt=0, allow_inf_nan=False)
    """The delay before the first retry (before jitter)."""
    max_backoff: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    """The longest delay the backoff itself reaches: the cap of the exponential."""
    multiplier: float = Field(default=2.0, ge=1, allow_inf_nan=False)
    """Each retry's delay is this many times the previous one's, up to ``max_backoff``."""
    jitter: float = Field(default=0.2, ge=0, le=1)
    """The fraction of each delay drawn at random: a delay ``d`` becomes one in ``(d x (1 - jitter), d]``."""
    timeout: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    """Seconds one HTTP request may take, connecting included; past it the attempt counts as failed."""
    max_retry_after: float = Field(default=300.0, ge=0, allow_inf_nan=False)
    """The longest ``Retry-After`` honoured: a server asking for more is tried again after this long."""

    @model_validator(mode="after")
    def _cap_above_start(self) -> RetryPolicy:
        if self.max_backoff < self.initial_backoff:
            raise ValueError(f"max_backoff ({self.max_backoff:g}) is below initial_backoff ({self.initial_backoff:g})")
        return self


def backoff_delay(policy: RetryPolicy, attempt: int, draw: float, retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0 is the first retry, after the first failure).

    The contract:

    - The backoff is ``b = min(max_backoff, initial_backoff x multiplier ** attempt)``
      (no overflow however large ``attempt`` is), and the delay is
      ``b x (1 - jitter x draw)``: ``draw`` (uniform in [0, 1), from the
      caller's random source) spreads retries of many transitions apart, and
      the delay is never above ``b``, so never above ``max_backoff``, and
      never below ``b x (1 - jitter)``.
    - A server's ``Retry-After`` (seconds; None or not positive when there
      is none) is a floor: the delay is at least ``min(retry_after,
      max_retry_after)``. So a retry never comes sooner than the server
      asked, unless it asked for more than ``max_retry_after`` (5 minutes by
      default): a sink cannot hold one group's alerts back for hours by
      saying so. ``Retry-After`` gets no jitter: the server chose the time.

    Raises ValueError when ``attempt`` is negative or ``draw`` is outside [0, 1).
    """
    if attempt < 0:
        raise ValueError(f"attempt must be 0 or more, not {attempt}")
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"draw must be in [0, 1), not {draw}")
    start, cap = policy.initial_backoff, policy.max_backoff
    # Compared in logarithms, so that multiplier ** attempt cannot overflow.
    if policy.multiplier == 1.0 or attempt * math.log(policy.multiplier) < math.log(cap / start):
        backoff = min(cap, start * policy.multiplier**attempt)
    else:
        backoff = cap
    delay = backoff * (1.0 - policy.jitter * draw)
    if retry_after is not None and retry_after > 0 and not math.isnan(retry_after):
        delay = max(delay, min(retry_after, policy.max_retry_after))
    return delay


def parse_retry_after(value: str | None, now: float) -> float | None:
    """Seconds a ``Retry-After`` header value asks to wait, at ``now`` (seconds since the epoch).

    Both forms of RFC 9110: a number of seconds (``"120"``; a decimal
    fraction is accepted too) or an HTTP date (``"Wed, 21 Oct 2015 07:28:00
    GMT"``, counted from ``now``; 0 when it is past). None when ``value`` is
    None, empty or neither form, or a negative number.
    """
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 and math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": no zone given; an HTTP date is GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)
