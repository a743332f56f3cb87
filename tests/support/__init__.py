"""What the tests and the benchmarks share: real worker processes, waiting with a deadline,
coordinator records on ``__consumer_offsets``, and the traffic whose lag they measure.

- ``waiting``: the one wait-until helper (sync and async), failing with what it waited for;
- ``processes``: liveness and ``/proc`` figures of a process by its pid;
- ``worker``: a real ``faust -A kagent.app worker`` process (start, stop, log, URL, metrics);
- ``web``: a worker's JSON views;
- ``coordinator``: coordinator-record builders (the simulator's), publishing and producing;
- ``topics``: reading a topic until something has arrived;
- ``faults``: faults the embedded broker cannot cause;
- ``s3_broker``: Tansu on moto's S3 server, whose data survives a restart;
- ``tls``: a certificate authority made in a test;
- ``security_front``: TLS and SASL in front of the embedded broker, which cannot serve them itself;
- ``routes``: the paths a worker's web server serves;
- ``kubernetes``: deploy/kubernetes rendered by kustomize and validated against the API's schemas.

The benchmarks, run as ``python benchmarks/NAME.py``, put the repository root on ``sys.path``
themselves to import this package; the tests get it from pytest's ``python -m`` run.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
"""The repository root (the worker processes run there)."""
