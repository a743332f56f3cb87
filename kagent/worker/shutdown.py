"""Bounded shutdown, and error logs at a bounded rate while the cluster is unreachable.

A worker told to stop (SIGTERM, Ctrl-C) must end within :data:`SHUTDOWN_BOUND`
seconds whether or not the broker answers. Each stage's stop is bounded by
:data:`STAGE_STOP_TIMEOUT`; Faust's own shutdown is not bounded: with the
broker gone, its consumer thread dies while closing its fetcher and mode
waits for it forever (mode 0.4, faust-streaming 0.15). :func:`arm_watchdog`
ends the process once the bound has passed, after logging why.

While the broker is unreachable, aiokafka logs each failed connection,
metadata update and fetch (100-200 lines a second were seen);
:class:`RepeatedErrorFilter` lets one line of each kind through per
interval and says how many it held back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

__all__ = ["SHUTDOWN_BOUND", "STAGE_STOP_TIMEOUT", "RepeatedErrorFilter", "arm_watchdog", "limit_repeated_errors"]

log = logging.getLogger(__name__)

SHUTDOWN_BOUND = 12.0
"""Seconds from the start of a shutdown to the end of the process, at most."""

STAGE_STOP_TIMEOUT = 5.0
"""Seconds one stage's stop may take before it is abandoned."""

REPEAT_INTERVAL = 10.0
"""Seconds in which one kind of error from the client libraries is logged once."""

LIMITED_LOGGERS = ("aiokafka", "faust", "mode")
"""Loggers (and their children) whose repeated warnings and errors are limited; kagent's own are not."""


def arm_watchdog(bound: float = SHUTDOWN_BOUND, crashed: Callable[[], bool] = lambda: False) -> threading.Timer:
    """End the process ``bound`` seconds from now unless it has ended by then: exit code 0 after a
    clean stop request, 1 if ``crashed()``. Call it when a shutdown starts."""

    def expire() -> None:
        code = 1 if crashed() else 0
        log.error("shutdown did not finish within %g s (the broker may be unreachable); exiting with %d", bound, code)
        logging.shutdown()
        os._exit(code)

    timer = threading.Timer(bound, expire)
    timer.daemon = True
    timer.start()
    return timer


class RepeatedErrorFilter(logging.Filter):
    """Passes a warning or error of the client libraries once per ``interval`` for each
    (logger, message template); the next one passed says how many were held back."""

    def __init__(self, interval: float = REPEAT_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._interval = interval
        self._clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not record.name.startswith(LIMITED_LOGGERS):
            return True
        key = (record.name, str(record.msg))
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            record.msg = f"{record.msg} (and {held} more like it in the last {self._interval:g} s)"
        return True


def limit_repeated_errors(interval: float = REPEAT_INTERVAL) -> RepeatedErrorFilter:
    """Add one :class:`RepeatedErrorFilter` to every logger of the client libraries created so
    far (a logger's filters see only its own records, so each gets it); returns it. Call it once
    those libraries are imported: handlers need not exist yet."""
    limiter = RepeatedErrorFilter(interval)
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and name.startswith(LIMITED_LOGGERS):
            logger.addFilter(limiter)
    return limiter
