"""The paths a worker's web server serves, read from the app ``kagent worker`` runs, without starting it."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile

from tests.support import REPO

__all__ = ["worker_routes"]


@functools.cache
def worker_routes() -> frozenset[str]:
    """Every path Faust routes to a view of ``kagent.app`` (its ``app.web.views``: the API, the dashboard,
    ``/healthz``, ``/readyz``, ``/metrics``). Read in a process of its own, since importing ``kagent.app``
    builds the app from the environment's settings: here the defaults, with a data directory of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {name: value for name, value in os.environ.items() if not name.startswith("KAGENT_")}
        env["KAGENT_DATA_DIR"] = os.path.join(tmp, "data")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        result = subprocess.run(
            [sys.executable, "-c", "import json, kagent.app; print(json.dumps(sorted(kagent.app.app.web.views)))"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp,
            env=env,
        )
    assert result.returncode == 0, f"importing kagent.app failed:\n{result.stderr}"
    return frozenset(json.loads(result.stdout.splitlines()[-1]))
