"""`kagent.worker.applied_offsets`: each derived-events record judged against storage's own position,
and records Faust fetched but lost read again."""

from __future__ import annotations

from kagent.worker.applied_offsets import AppliedOffsets, Verdict


def test_records_in_order_are_applied_and_those_applied_before_are_skipped() -> None:
    offsets = AppliedOffsets()
    assert offsets.judge(0, 0, None, 0.0) == (Verdict.APPLY, None)  # nothing applied yet: take it as it comes
    assert offsets.judge(0, 7, 7, 0.0) == (Verdict.APPLY, None)
    assert offsets.judge(0, 6, 8, 0.0) == (Verdict.DUPLICATE, None)


def test_a_record_after_lost_ones_starts_a_repair_once_and_waits_for_the_position() -> None:
    offsets = AppliedOffsets(give_up_after=30)
    assert offsets.judge(1, 15, 12, 0.0) == (Verdict.EARLY, 12)  # 12-14 lost: seek back to 12
    assert offsets.repairing(1) == 12
    assert offsets.judge(1, 16, 12, 0.1) == (Verdict.EARLY, None)  # still queued from before the seek: no new seek
    assert offsets.judge(1, 12, 12, 0.2) == (Verdict.APPLY, None)
    assert offsets.repairing(1) is None


def test_a_repair_that_waited_long_enough_takes_the_next_record() -> None:
    offsets = AppliedOffsets(give_up_after=30)
    assert offsets.judge(2, 40, 10, 0.0) == (Verdict.EARLY, 10)
    assert offsets.judge(2, 40, 10, 29.9) == (Verdict.EARLY, None)
    assert offsets.judge(2, 40, 10, 30.0) == (Verdict.APPLY, None)  # 10-39 are gone from the log
    assert offsets.repairing(2) is None


def test_fetched_records_never_delivered_are_read_again_after_a_quiet_spell() -> None:
    offsets = AppliedOffsets(idle_after=5)
    fetched = {0: (14, 12), 1: (9, 9)}
    assert offsets.due(fetched, 100.0) == {}  # first seen behind: records may be on their way
    assert offsets.due(fetched, 104.9) == {}
    assert offsets.due(fetched, 105.0) == {0: 12}  # partition 1 has nothing waiting
    assert offsets.repairing(0) == 12
    assert offsets.due(fetched, 109.0) == {}  # a seek is given time to deliver
    assert offsets.due(fetched, 110.0) == {0: 12}  # and made again if nothing came


def test_a_delivery_postpones_the_repair_and_catching_up_ends_it() -> None:
    offsets = AppliedOffsets(idle_after=5)
    assert offsets.due({0: (14, 12)}, 0.0) == {}
    offsets.delivered({0}, 4.0)  # a batch of it ended: storage is busy, not starved
    assert offsets.due({0: (14, 12)}, 8.0) == {}
    assert offsets.due({0: (14, 12)}, 9.0) == {0: 12}
    assert offsets.due({0: (14, 14)}, 9.5) == {}
    assert offsets.repairing(0) is None


def test_partitions_no_longer_held_are_forgotten() -> None:
    offsets = AppliedOffsets(idle_after=5)
    assert offsets.judge(3, 20, 10, 0.0) == (Verdict.EARLY, 10)
    assert offsets.due({0: (5, 5)}, 1.0) == {}
    assert offsets.repairing(3) is None
    assert offsets.judge(3, 20, 10, 2.0) == (Verdict.EARLY, 10)  # held again: a fresh repair


def test_no_position_known_never_repairs() -> None:
    offsets = AppliedOffsets(idle_after=5)
    assert offsets.due({0: (30, None)}, 0.0) == {}
    assert offsets.due({0: (30, None)}, 60.0) == {}
