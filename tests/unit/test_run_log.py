"""``kagent run``'s own process logs to its run log (:func:`kagent.tools.cli.log_to_file`), not the terminal.

A real :class:`~kagent.client.recommendation_feed.ApiFeed` asks a port nothing listens on, as the simulator's
applying assignor does before the worker answers: its warning goes to the file, with the logger's name, as do
Python's warnings; after the block, the root logger is as it was. That none of it reaches the terminal of a
real ``kagent run`` is tested in tests/integration/test_cli.py.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from kagent.client.recommendation_feed import ApiFeed
from kagent.tools.cli import log_to_file
from kagent.tools.embedded import free_port
from tests.support.waiting import wait_until_async


async def test_a_feeds_failure_and_a_warning_go_to_the_run_log(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    url = f"http://127.0.0.1:{free_port()}"
    with log_to_file(path, "info"):
        feed = ApiFeed(url, "shipments-processors", refresh=0.05, timeout=1.0)
        await feed.start()
        try:

            async def failed() -> str | None:
                return feed.error

            await wait_until_async(failed, 10, "the feed to fail against a closed port")
        finally:
            await feed.stop()
        warnings.warn("a library's deprecation", DeprecationWarning, stacklevel=1)
    logging.getLogger("aiokafka").warning("after the block: not in the file")

    text = path.read_text()
    assert f"WARNING kagent.client.recommendation_feed: kagent API at {url} (group shipments-processors)" in text
    assert "the assignor keeps what it heard before" in text
    assert "WARNING py.warnings:" in text and "a library's deprecation" in text
    assert "after the block" not in text
    assert (list(root.handlers), root.level) == (handlers, level)
