"""Progress of a running pipeline job: its current step and the Spark stages running for it.

:class:`Progress` is a context manager. While open, a daemon thread reads
Spark's status tracker every ``interval`` seconds and, when what it would
show changed, writes one status line: rewritten in place on a terminal,
appended otherwise. :meth:`Progress.step` names the step that starts (and
labels Spark's jobs with it, for the Spark UI).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from pyspark import SparkContext

__all__ = ["Progress", "describe_stages"]


def describe_stages(stages: list[tuple[int, int, int, int]]) -> str:
    """``stage 3: 12/50 tasks (2 running)`` per active stage ``(id, done, running, total)``, joined."""
    return ", ".join(
        f"stage {stage}: {done}/{total} tasks" + (f" ({running} running)" if running else "")
        for stage, done, running, total in sorted(stages)
    )


class Progress:
    """Reports a job's steps and Spark stages through ``write(text, in_place)``."""

    def __init__(
        self, spark_context: SparkContext, write: Callable[[str, bool], None], in_place: bool, interval: float = 0.5
    ) -> None:
        self._context = spark_context
        self._write = write
        self._in_place = in_place
        self._interval = interval
        self._step = ""
        self._shown = ""
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kagent-pipeline-progress", daemon=True)

    def step(self, name: str) -> None:
        """A new step starts: show it now, and label the Spark jobs that follow with it."""
        self._step = name
        self._context.setJobDescription(name)
        self._show(f"{name} ...")

    def _run(self) -> None:
        while not self._closed.wait(self._interval):
            tracker = self._context.statusTracker()
            stages = []
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    stages.append((stage_id, info.numCompletedTasks, info.numActiveTasks, info.numTasks))
            if stages:
                self._show(f"{self._step}: {describe_stages(stages)}")

    def _show(self, text: str) -> None:
        with self._lock:
            if text != self._shown:
                self._shown = text
                self._write(text, self._in_place)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closed.set()
        self._thread.join()
        self._context.setJobDescription(None)  # type: ignore[arg-type]
