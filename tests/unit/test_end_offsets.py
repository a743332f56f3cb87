"""`kagent.worker.end_offsets`, its pure part: how a poll is counted, how long its requests may take, and
when failed polls make the worker not ready."""

from __future__ import annotations

import pytest
from aiokafka.structs import TopicPartition as TP

from kagent.worker.end_offsets import (
    UNREADY_AFTER_POLLS,
    AnsweredPolls,
    PollOutcome,
    poll_outcome,
    request_timeout,
    unready_after,
)
from kagent.worker.list_offsets import Offsets, Reason, Unavailable

MEASURED = Offsets(log_start=0, log_end=10)
UNKNOWN = Unavailable(Reason.UNKNOWN_PARTITION, "topic has 2 partitions")
FAILED = Unavailable(Reason.REQUEST_FAILED, "node 1 did not answer within 1.5 s")
LEADERLESS = Unavailable(Reason.NO_LEADER)


@pytest.mark.parametrize(
    ("answers", "outcome"),
    [
        ([MEASURED, MEASURED], PollOutcome.OK),
        ([MEASURED, UNKNOWN], PollOutcome.PARTIAL),
        ([MEASURED, FAILED], PollOutcome.PARTIAL),  # one leader down, another answered
        ([UNKNOWN, UNKNOWN], PollOutcome.PARTIAL),  # answered by the metadata: only deleted topics are read
        ([LEADERLESS], PollOutcome.PARTIAL),
        ([FAILED, FAILED], PollOutcome.ERROR),  # no broker reached
        ([UNKNOWN, FAILED], PollOutcome.ERROR),  # nothing measured, and the leaders did not answer
    ],
)
def test_a_poll_is_ok_partial_or_an_error_by_what_its_partitions_got(
    answers: list[Offsets | Unavailable], outcome: PollOutcome
) -> None:
    assert poll_outcome({TP("t", p): answer for p, answer in enumerate(answers)}) is outcome


def test_a_poll_waits_at_most_three_request_timeouts_within_its_interval() -> None:
    for interval in (0.5, 1.0, 5.0, 30.0):
        assert 3 * request_timeout(interval) <= 0.9 * interval + 1e-9
    assert request_timeout(5.0) == pytest.approx(1.5)


def test_the_worker_is_unready_after_the_stall_bound_or_three_intervals_whichever_is_longer() -> None:
    assert unready_after(5.0, 60.0) == 60.0
    assert unready_after(30.0, 60.0) == UNREADY_AFTER_POLLS * 30.0


def test_failed_polls_make_the_worker_unready_after_the_bound_and_one_answer_makes_it_ready() -> None:
    polls = AnsweredPolls(unready_after=10.0)
    assert polls.answering(0.0)
    polls.observe(PollOutcome.OK, 0.0)
    for began in (1.0, 2.0, 3.0):  # a run of failures begins at 1.0
        polls.observe(PollOutcome.ERROR, began)
    assert polls.failed == 3
    assert polls.answering(10.9)
    assert not polls.answering(11.0)
    polls.observe(PollOutcome.ERROR, 11.0)
    assert not polls.answering(12.0)
    polls.observe(PollOutcome.PARTIAL, 12.0)  # some partitions measured: the cluster answers
    assert polls.answering(12.0)
    assert polls.failed == 0
    polls.observe(PollOutcome.ERROR, 13.0)  # a new run counts from its own first failure
    assert polls.answering(22.9)
    assert not polls.answering(23.0)


def test_a_poll_that_asks_nothing_ends_a_run_of_failures() -> None:
    polls = AnsweredPolls(unready_after=1.0)
    polls.observe(PollOutcome.ERROR, 0.0)
    assert not polls.answering(5.0)
    polls.observe(None, 5.0)  # no group reads anything: nothing to measure, nothing failing
    assert polls.answering(5.0)
