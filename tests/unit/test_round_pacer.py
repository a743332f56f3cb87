"""The evaluator's round pacer: a long round of evaluations leaves the event loop to the other stages."""

from __future__ import annotations

import asyncio
import time

from kagent.worker.evaluator import (
    BEHIND_RECORDS,
    BEHIND_SECONDS,
    BEHIND_SHARE,
    DELAY_HOLDS,
    ROUND_SHARE,
    Evaluator,
    RoundPacer,
)
from kagent.worker.loop_slices import waited, waits_through
from kagent.worker.metrics import Metrics
from kagent.worker.stalls import BatchDelay
from tests.support.evaluators import bare_evaluator

PIECE = 0.003
"""Seconds of work in one piece of the round (one group's evaluation, say)."""


def _work(seconds: float) -> float:
    """Busy for ``seconds`` of wall time; the time it took (at least ``seconds``)."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        pass
    return time.monotonic() - started


async def _round(pacer: RoundPacer, pieces: int) -> tuple[float, float]:
    """Run ``pieces`` pieces of :data:`PIECE` s paced by ``pacer``: the round's wall time and its busy time."""
    started = time.monotonic()
    busy = 0.0
    for _ in range(pieces):
        busy += _work(PIECE)
        await pacer.pause()
    return time.monotonic() - started, busy


async def test_a_long_round_leaves_the_loop_idle_as_long_as_it_ran_at_half_share() -> None:
    took, busy = await _round(RoundPacer(every=0.002, share=0.5), 20)
    # Each pause idles at least as long as the piece before it ran: a machine busy with other things
    # only stretches the round further.
    assert took >= 2 * busy


async def test_a_round_shorter_than_every_does_not_pause() -> None:
    spent: list[float] = []
    pacer = RoundPacer(every=10.0, share=0.5, spent=spent.append)
    started = time.monotonic()
    busy = 0.0
    for _ in range(3):
        busy += _work(0.05)
        await pacer.pause()
    # A pause would have idled as long as the work before it: the round would have taken twice its work.
    assert time.monotonic() - started < 1.5 * busy
    assert spent == []  # no pause: nothing told yet
    pacer.done()
    assert len(spent) == 1 and spent[0] > 0


async def test_the_other_work_done_in_the_pauses_is_not_the_rounds() -> None:
    other_cpu = 0.0

    async def other_stage() -> None:
        nonlocal other_cpu
        while True:
            cpu = time.thread_time()
            _work(PIECE)
            other_cpu += time.thread_time() - cpu
            await asyncio.sleep(0)

    spent: list[float] = []
    pacer = RoundPacer(every=0.002, share=0.5, spent=spent.append)
    other = asyncio.create_task(other_stage())
    own_cpu = 0.0
    for _ in range(10):
        cpu = time.thread_time()
        _work(PIECE)
        own_cpu += time.thread_time() - cpu
        await pacer.pause()
        assert len(spent) >= 1  # told as the round goes, not only at its end
    other.cancel()  # before the loop runs it again: all it did, it did in the round's pauses
    pacer.done()
    assert other_cpu > 0
    assert own_cpu <= sum(spent) < own_cpu + other_cpu  # all of the round's own work, none of the other's


async def test_what_runs_while_the_round_waits_elsewhere_is_not_the_rounds() -> None:
    spent: list[float] = []
    pacer = RoundPacer(every=10.0, share=0.5, spent=spent.append)

    async def flush() -> str:  # another stage's work, as a yield between slices or a flush lets run
        await asyncio.sleep(0)
        return "flushed"

    other_cpu = 0.0

    async def other() -> None:
        nonlocal other_cpu
        cpu = time.thread_time()
        _work(10 * PIECE)
        other_cpu = time.thread_time() - cpu

    cpu = time.thread_time()
    _work(PIECE)
    own_cpu = time.thread_time() - cpu
    running = asyncio.create_task(other())
    assert await pacer.elsewhere(flush()) == "flushed"
    assert running.done()  # it ran while the round waited
    pacer.done()
    assert other_cpu > 0
    assert own_cpu <= sum(spent) < own_cpu + other_cpu


async def test_while_ingest_is_behind_a_long_round_takes_the_smaller_share() -> None:
    looks = 0

    async def behind() -> bool:
        nonlocal looks
        looks += 1
        return True

    pacer = RoundPacer(every=0.002, share=0.5, behind=behind, behind_share=0.2, look_every=60.0)
    took, busy = await _round(pacer, 10)
    # At a fifth of the loop, each pause idles four times as long as the piece before it ran.
    assert took >= 5 * busy
    assert pacer.share == 0.2
    assert looks == 1  # looked at the first pause, not again within look_every


async def test_the_round_looks_again_and_takes_half_once_ingest_caught_up() -> None:
    answers = [True, False]

    async def behind() -> bool:
        return answers.pop(0)

    pacer = RoundPacer(every=0.002, share=0.5, behind=behind, behind_share=0.2, look_every=0.0)
    _work(PIECE)
    await pacer.pause()
    assert pacer.share == 0.2
    _work(PIECE)
    await pacer.pause()
    assert pacer.share == 0.5
    assert not answers


async def test_a_round_shorter_than_every_never_asks_whether_ingest_is_behind() -> None:
    async def behind() -> bool:
        raise AssertionError("asked")

    pacer = RoundPacer(every=10.0, share=0.5, behind=behind)
    _work(0.01)
    await pacer.pause()
    assert pacer.share == 0.5


class _Stage:
    """A stage reporting a fixed backlog (or failing to) and delay: what the evaluator asks of the source
    and storage."""

    def __init__(self, name: str, backlog: int | Exception | None, delay: BatchDelay | None = None) -> None:
        self.name = name
        self.applied = 0
        self.delay = delay
        self._backlog = backlog

    async def backlog(self) -> int | None:
        if isinstance(self._backlog, Exception):
            raise self._backlog
        return self._backlog

    async def where(self) -> str:
        return ""


def _evaluator(metrics: Metrics, *stages: _Stage) -> Evaluator:
    """An evaluator whose ingest is ``stages``; nothing else of it is used here."""
    return bare_evaluator(metrics=metrics, ingest=stages)


def _share(metrics: Metrics) -> float | None:
    return metrics.registry.get_sample_value("kagent_evaluation_loop_share")


async def test_the_evaluator_gives_way_while_a_stage_has_more_than_behind_records_waiting() -> None:
    metrics = Metrics()
    caught_up = _evaluator(metrics, _Stage("source", BEHIND_RECORDS), _Stage("storage", 0))
    assert _share(metrics) == ROUND_SHARE
    assert not await caught_up._ingest_behind()
    assert _share(metrics) == ROUND_SHARE

    behind = _evaluator(metrics, _Stage("source", 0), _Stage("storage", BEHIND_RECORDS + 1))
    assert await behind._ingest_behind()
    assert _share(metrics) == BEHIND_SHARE


async def test_a_backlog_not_known_or_not_read_does_not_count_as_behind() -> None:
    metrics = Metrics()
    evaluator = _evaluator(metrics, _Stage("source", None), _Stage("storage", RuntimeError("mid-rebalance")))
    assert not await evaluator._ingest_behind()
    assert _share(metrics) == ROUND_SHARE
    # A stage that cannot be read does not hide one that can: the next is still asked.
    evaluator = _evaluator(metrics, _Stage("source", RuntimeError("no consumer")), _Stage("storage", 10**6))
    assert await evaluator._ingest_behind()
    assert _share(metrics) == BEHIND_SHARE


async def test_a_stage_whose_last_batch_came_late_is_behind_whatever_its_backlog_says() -> None:
    # A broker that gives a packed topic's end as its last batch's offset: the count reads 0 while
    # records wait; the newest record applied having waited says so.
    metrics = Metrics()
    now = time.time()
    late = BatchDelay(BEHIND_SECONDS + 0.5, now)
    evaluator = _evaluator(metrics, _Stage("source", 0, BatchDelay(0.2, now)), _Stage("storage", 0, late))
    assert await evaluator._ingest_behind()
    assert _share(metrics) == BEHIND_SHARE
    prompt = BatchDelay(BEHIND_SECONDS, now)
    evaluator = _evaluator(metrics, _Stage("source", 0), _Stage("storage", 0, prompt))
    assert not await evaluator._ingest_behind()
    assert _share(metrics) == ROUND_SHARE
    # Late, but long ago: nothing applied since, so nothing may wait (the traffic stopped).
    long_ago = BatchDelay(BEHIND_SECONDS + 5, now - DELAY_HOLDS - 1)
    evaluator = _evaluator(metrics, _Stage("source", 0), _Stage("storage", 0, long_ago))
    assert not await evaluator._ingest_behind()


async def test_an_evaluations_waits_on_the_broker_are_not_the_rounds() -> None:
    """What the loop runs while an evaluation waits on a flush or an acknowledgement (``waited``) is left out
    of the round's CPU inside ``waits_through``; outside a round, ``waited`` simply awaits."""
    spent: list[float] = []
    pacer = RoundPacer(every=10.0, share=0.5, spent=spent.append)
    other_cpu = 0.0

    async def other() -> None:  # storage and the source, as they run while an evaluation waits
        nonlocal other_cpu
        cpu = time.thread_time()
        _work(10 * PIECE)
        other_cpu = time.thread_time() - cpu

    async def acknowledged() -> str:
        await asyncio.sleep(0)
        return "acknowledged"

    async def evaluation() -> str:
        _work(PIECE)
        return await waited(acknowledged())

    assert await waited(acknowledged()) == "acknowledged"  # no round: as is
    cpu = time.thread_time()
    running = asyncio.create_task(other())
    with waits_through(pacer.elsewhere):
        assert await evaluation() == "acknowledged"
    pacer.done()
    own_cpu = time.thread_time() - cpu - other_cpu
    assert running.done() and other_cpu > 0  # it ran while the evaluation waited
    assert sum(spent) < own_cpu + other_cpu / 2  # the evaluation's own work, not the other's
