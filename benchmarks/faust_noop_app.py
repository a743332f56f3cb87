"""A Faust app whose agent does nothing with each record of ``__consumer_offsets``: bench_ingest's second baseline.

    BENCH_BROKER=kafka://host:port BENCH_APP_ID=... BENCH_RECORDS=n python -m faust -A faust_noop_app worker

It measures what Faust's per-event machinery alone costs: from the first
event delivered to the ``BENCH_RECORDS``-th, it prints one line
``faust-noop <records/s> <CPU µs per record>`` and exits.
"""

from __future__ import annotations

import os
import sys
import time

import faust

app = faust.App(
    os.environ["BENCH_APP_ID"],
    broker=os.environ["BENCH_BROKER"],
    store="memory://",
    web_enabled=False,
    broker_session_timeout=2,  # Tansu holds a group's first join for half of it
    broker_heartbeat_interval=0.5,
    consumer_auto_offset_reset="earliest",
    datadir=os.environ.get("BENCH_DATA_DIR", "faust-noop-data"),
)
offsets = app.topic(
    "__consumer_offsets", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
)
expected = int(os.environ["BENCH_RECORDS"])


@app.agent(offsets)
async def do_nothing(stream: faust.StreamT[bytes]) -> None:
    seen = 0
    started = cpu_started = 0.0
    async for _ in stream.events():
        if not seen:
            started, cpu_started = time.perf_counter(), time.process_time()
        seen += 1
        if seen == expected:
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
            print(f"faust-noop {expected / seconds:.0f} {cpu / expected * 1e6:.1f}", flush=True)
            sys.stdout.flush()
            os._exit(0)  # the figure is out; no need for an orderly shutdown
