"""When a stage counts as stalled (kagent.worker.stalls.StallDetector)."""

from __future__ import annotations

from kagent.worker.stalls import StallDetector


def test_records_waiting_with_none_applied_for_the_bound_is_a_stall() -> None:
    detector = StallDetector(stall_after=60)
    assert not detector.observe("storage", 222, 778, now=0)
    assert not detector.observe("storage", 222, 778, now=59)
    assert detector.observe("storage", 222, 778, now=60)
    assert detector.stalled() == {"storage": 0}


def test_progress_or_an_empty_backlog_is_no_stall_and_ends_one() -> None:
    detector = StallDetector(stall_after=60)
    detector.observe("storage", 222, 778, now=0)
    assert detector.observe("storage", 222, 778, now=90)
    assert not detector.observe("storage", 223, 777, now=91)  # one record applied: progress
    assert detector.stalled() == {}
    assert not detector.observe("storage", 223, 777, now=150)  # the bound counts from the progress
    assert not detector.observe("storage", 223, 0, now=200)  # nothing waits: idle, not stalled
    assert not detector.observe("storage", 223, 0, now=400)
    assert not detector.observe("storage", 223, None, now=500)  # unknown backlog (no assignment yet)


def test_stages_are_watched_apart() -> None:
    detector = StallDetector(stall_after=10)
    detector.observe("source", 5, 10, now=0)
    detector.observe("storage", 5, 10, now=0)
    assert not detector.observe("source", 6, 10, now=20)
    assert detector.observe("storage", 5, 10, now=20)
    assert set(detector.stalled()) == {"storage"}
