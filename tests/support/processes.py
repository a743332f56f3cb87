"""A process by its pid, as ``/proc`` shows it: alive or not, its memory and its CPU time; the machine's
CPU time, busy and in all; and py-spy's stacks of a process while a block runs (the benchmarks' ``--profile``).

Stopping a process the tests or benchmarks started is ``kagent.tools.embedded.stop_process``
(SIGTERM, then SIGKILL after a bound) or :meth:`tests.support.worker.Worker.stop`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["cpu_seconds", "machine_cpu", "memory_kb", "process_alive", "process_stopped", "profiled"]


def _stat_fields(pid: int, stat: Path | None = None) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` (or of ``stat``, a thread's) after the command name (field 3, the
    state, first)."""
    return (stat or Path(f"/proc/{pid}/stat")).read_text().rsplit(")", 1)[1].split()


def process_alive(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie counts as gone)."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except FileNotFoundError:
        return False


def process_stopped(pid: int) -> bool:
    """True once every thread of ``pid`` is stopped (state ``T``, as SIGSTOP leaves it). The signal stops
    each thread as it next enters the kernel, so on a busy machine a thread may still run a moment after
    ``os.kill`` has returned."""
    return all(_stat_fields(pid, task / "stat")[0] == "T" for task in Path(f"/proc/{pid}/task").iterdir())


def memory_kb(pid: int) -> dict[str, int]:
    """``VmRSS`` (resident memory now) and ``VmHWM`` (its peak) of process ``pid``, in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


def cpu_seconds(pid: int) -> float:
    """User + system CPU time process ``pid`` has used, in seconds."""
    fields = _stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[float, float]:
    """The machine's CPU time so far over all its cores, in seconds: (busy, in all), from ``/proc/stat``'s
    ``cpu`` line. Busy is all but idle and I/O wait; the busy share of a stretch is the difference of two
    readings' busy over that of their totals."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest time is within user)
    idle = fields[3] + fields[4]
    tick = os.sysconf("SC_CLK_TCK")
    return (total - idle) / tick, total / tick


@contextlib.contextmanager
def profiled(pid: int, output: Path | None) -> Iterator[None]:
    """py-spy's raw (collapsed) stacks of process ``pid`` while the block runs, written to ``output``;
    nothing when ``output`` is None. py-spy is the one installed beside this Python."""
    if output is None:
        yield
        return
    py_spy = Path(sys.executable).parent / "py-spy"
    command = [str(py_spy), "record", "--pid", str(pid), "--format", "raw", "--output", str(output)]
    profiler = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        profiler.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        profiler.wait(60)
