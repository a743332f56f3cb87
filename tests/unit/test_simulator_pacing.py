"""A simulated member's processing delay, paced by the clock (`processed_by`)."""

from __future__ import annotations

from kagent.tools.simulator.member import PACING_SLACK, processed_by


def test_time_spent_polling_and_committing_counts_as_processing_while_behind() -> None:
    # Three batches of 1 s of work each; the member spends 0.3 s polling and committing before each.
    done = 0.0
    for _ in range(3):
        done = processed_by(done, done + 0.3, 1.0)
    assert done == 3.0  # 1 s a batch, as its delay says: not 3.9 s, as sleeping after each poll gave


def test_idle_time_is_not_made_up_beyond_the_slack() -> None:
    # Caught up at 1.0, the next batch arrives at 5.0: at most PACING_SLACK of the wait counts.
    assert processed_by(1.0, 5.0, 2.0) == 5.0 - PACING_SLACK + 2.0
