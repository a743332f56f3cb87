"""Evaluation: each held group's state -> trigger state -> recommendations on the topic.

Every group is evaluated once per ``KAGENT_EVALUATE_INTERVAL``; a short tick
finds the groups that are due. A group storage says changed
(:class:`~kagent.worker.group_state.GroupChanged`) is evaluated at the next
tick if its trigger is not already holding and half an interval has passed,
so a skew that appears is seen soon, while the hold still takes whole
intervals. A group seen for the first time counts as changed then: it is
evaluated half an interval later. The decision itself is :func:`kagent.core.evaluation.evaluate`, a
pure function of the group's snapshot and its trigger state.

A quiet group is not evaluated again while nothing it reads changes. Quiet:
its last evaluation sent nothing, left nothing to send and no hold counting,
found its members keeping up, and its lag is in records. Then an evaluation at
its next due time would find the same (trigger state, incidents, status),
unless storage sends a notice (a commit, an assignment, an end offset moving on
a partition it reads), or the clock reaches the time a partition's silence
could mean STOP (:meth:`~kagent.worker.group_state.GroupStateReader.status_holds_until`)
or a cleared group's cooldown ends. Such a group's due time passes without the
work (``kagent_evaluations_skipped_total``); it is evaluated in full at least
every :data:`QUIET_ROUNDS` intervals, or, when the worker holds so many
groups that those refreshes would take more than :data:`REFRESH_SHARE` of a
core, as often as that share allows (:func:`refresh_after`). A round over a
large cluster where little moves then costs what moves, not every group.

Each group is evaluated at the time its evaluation runs (a round over thousands
of groups takes seconds), and how long after it came due goes to
``kagent_evaluation_delay_seconds``: a worker with more changing groups than it
can evaluate at their interval evaluates each less often (:class:`RoundPacer`),
and says by how much.

After each evaluation it judges the group's health (Burrow's rules, from
storage's commit windows) and steps the group's incidents
(:class:`~kagent.worker.incident_log.IncidentLog`): a ``lag-skew`` incident
opens with a recommendation and resolves when the skew falls below threshold
x hysteresis; a health incident opens with a STOP, STALL or REWIND status and
resolves when it is gone; a deleted or empty group resolves them all.

The stage owns the evaluation-state and incidents tables: hold counts,
hysteresis, cooldown and open incidents survive a failover. A state is
written only when an evaluation changed it, so evaluating unchanged groups
writes nothing; a state that led to a recommendation, or to incident
transitions, is in its changelog before they are sent.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import faust
from faust.types import TopicT

from kagent.core.api_records import summarize
from kagent.core.drain_time import member_drain, slowest
from kagent.core.evaluation import EvaluationState, evaluate
from kagent.core.group_health import GroupStatus, group_status
from kagent.core.incidents import Incident, IncidentObservation
from kagent.core.member_lag import unit_lag
from kagent.core.policy import EvaluationPolicy, LagUnit
from kagent.core.recommendation import Recommendation
from kagent.core.snapshot import GroupSnapshot
from kagent.worker.changelog import PRODUCER_ERRORS, ChangelogWriteError, ChangelogWriter
from kagent.worker.channel import Channel
from kagent.worker.group_overview import GroupOverview
from kagent.worker.group_state import GroupChange, GroupChanged, GroupStateReader, OpenIncidentsReader
from kagent.worker.incident_log import IncidentLog
from kagent.worker.loop_slices import LoopSlices, next_turn, slice_length, waited, waits_through
from kagent.worker.metrics import HotPartitionFigures, MemberDrain, Metrics
from kagent.worker.recommendation_history import RecommendationHistory
from kagent.worker.stage import Stage
from kagent.worker.stalls import ReportsProgress
from kagent.worker.topology import GroupPartitionedTable

__all__ = ["Evaluator"]

log = logging.getLogger(__name__)

T = TypeVar("T")

QUIET_ROUNDS = 10
"""A quiet group skipped at its due time is evaluated in full again after this many intervals at the
latest, whatever else says it need not be (its summary's figures and flags stay fresh), unless the worker
holds so many groups that refreshing them that often would take more than :data:`REFRESH_SHARE` of a core
(:func:`refresh_after`)."""

REFRESH_SHARE = 0.1
"""The most of a core the full evaluations of quiet groups may take, on average, before their refreshes are
spaced out beyond :data:`QUIET_ROUNDS` intervals. Why, measured by ``benchmarks/bench_scrape.py --groups 50000
--pool half`` (975,545 group-partitions, nothing committing once the mix was applied): refreshed every 10
intervals, those 50,000 quiet groups, about 0.9 ms of CPU each, asked for 1,000 evaluations a second, more
than half the loop can do, so the worker's rounds never ended and not one due time was skipped: its evaluator
used 0.41-0.43 of a core doing nothing new (three windows of 20 s). Refreshed as this share allows, 0.14."""

REFRESH_SPREAD = 0.25
"""The share of a refresh horizon by which each group's is shortened at random, so that groups evaluated
together drift apart (see :func:`refresh_after` for a group's first horizon)."""


def refresh_after(
    groups: int, evaluation_cpu: float | None, interval: float, jitter: float, first: bool = False
) -> float:
    """Seconds after an evaluation that finds a group quiet before it is evaluated in full again, if nothing
    it reads changes: :data:`QUIET_ROUNDS` intervals, or as long as refreshing ``groups`` groups (the
    worker's: all of them could be quiet), each once in that time at ``evaluation_cpu`` seconds of CPU an
    evaluation (None: not measured yet), takes :data:`REFRESH_SHARE` of a core, if that is longer; that
    horizon shortened by ``jitter`` (0 to 1) x :data:`REFRESH_SPREAD` of it, or, the ``first`` time the
    group is found quiet since the worker holds it, by ``jitter`` of it (so 0 up to the horizon).

    The groups a worker evaluates together, all of them after a start, a backlog or a failover, would
    otherwise come back together, a wave of refreshes every horizon: kept at exactly 10 intervals, the
    10,000 quiet groups of ``benchmarks/bench_scrape.py --groups 10000 --pool half`` came back every 50 s,
    7,400-8,400 evaluations in one 15 s window and 550-900 in most others, and a quarter's spread had not
    dissolved those waves 3 minutes later."""
    horizon = QUIET_ROUNDS * interval
    if evaluation_cpu is not None:
        horizon = max(horizon, groups * evaluation_cpu / REFRESH_SHARE)
    return horizon * (1 - (jitter if first else REFRESH_SPREAD * jitter))


SCAN_AT_LEAST_EVERY = 60.0
"""Seconds between two looks at which groups this worker holds, at most, when nothing says they changed."""

RESCAN_AFTER_REBALANCE = 60.0
"""Seconds after this worker's partitions changed during which it looks every :attr:`Evaluator.scan_every`
s: the groups it took over appear as Faust restores their tables, without notices."""

YIELD_EVERY = 0.002
"""Seconds a round of evaluations runs before it lets the event loop run other work: a round over
thousands of groups takes seconds, and the API, the consumers' heartbeats and the other stages wait
for the loop meanwhile (an API request waited 5 s behind a round over 5,000 groups). 2 ms, as the other
long works' slices are now (:data:`~kagent.worker.loop_slices.SLICE`; they were 5 ms): an evaluation takes about
1 ms, and a round's steps, run until they had taken 5 ms, took 5-10 ms, the longest of a worker's turns
under live commits and most of them (see :func:`~kagent.worker.loop_slices.next_turn` for what a
request waited). At 2 ms the workers evaluated as many groups (639 and 788 a second in two runs of
``benchmarks/bench_api.py``, against 636 and 856) and ingest kept its pace (``benchmarks/bench_ingest.py``,
four runs each way interleaved, with and without :func:`~kagent.worker.loop_slices.next_turn` and these
steps: 8.4-11.2 µs of CPU a record in the backlog against 9.1-10.2; live, the last record applied 1.3-4.8 s
after it was published against 4.2-5.0 s, though up to 230,000 records behind meanwhile against 167,000)."""

ROUND_SHARE = 0.5
"""The most of the event loop's time a long round of evaluations takes (:class:`RoundPacer`) while the
worker's ingest keeps up."""

BEHIND_SHARE = 0.2
"""The most of the event loop's time a long round takes while the source or storage is behind
(:data:`BEHIND_RECORDS`, :data:`BEHIND_SECONDS`)."""

BEHIND_RECORDS = 10_000
"""Records waiting for the source or for storage above which a long round of evaluations gives way to
them (:data:`BEHIND_SHARE`): as many as the source may leave on one ``__consumer_offsets`` partition and
still count as caught up (:data:`kagent.worker.offsets_topic.CAUGHT_UP_RECORDS`)."""

BEHIND_SECONDS = 3.0
"""Seconds the newest record of the source's or storage's last batch waited before it was applied
(:attr:`~kagent.worker.stalls.ReportsProgress.delay`) above which a long round gives way to them too. The
records waiting are counted from the broker's offsets, and where those say less than waits (a broker
that gives the end of a topic of packed derived events as its last batch's offset), the delay still
tells: under ``bench_scrape``'s live traffic storage's count read a few hundred while 400,000 records
waited for it, and its batches' delay rose to 5-8 s."""

DELAY_HOLDS = 10.0
"""Seconds for which a late batch says its stage is behind: a stage that has applied nothing since may have
nothing waiting (the traffic stopped), and what does wait its backlog counts."""

LOOK_EVERY = 1.0
"""Seconds between two looks of a long round at whether ingest is behind."""


class RoundPacer:
    """Paces a long round of work on the event loop: :meth:`pause` after each piece leaves the loop to
    everything else for ``(1 - share) / share`` of the time the round ran since its last pause, once
    that is at least ``every`` s, and goes on in a turn of the loop of its own
    (:func:`~kagent.worker.loop_slices.next_turn`). A round shorter than ``every`` never pauses.

    Why idle time and not a bare yield: reading ``__consumer_offsets`` and applying it wait on the
    broker a few round trips a batch, and with a bare yield each of those waits lasted a whole slice of
    evaluations. Measured by ``benchmarks/bench_ingest.py``'s live line, a worker holding 5,000 groups
    that commit every 5 s (38,000 commits/s), whose changed groups cost seconds of evaluations every
    2.5 s, on a quiet machine: with a bare yield it fell 588,199 records behind and applied the last
    74.8 s after it was published, at 123 µs of CPU a record; paced at half the loop, 81,862 behind,
    4.9 s, 29 µs (five runs with one core busy elsewhere: 186,799-309,308, 4.2-10.2 s, 25-32 µs; a
    third of the loop gave the same). A worker with more to evaluate than its share allows evaluates
    each group less often than its interval says; its tables stay current.

    While ingest is ``behind`` (asked at the first pause and then every ``look_every`` s of the round;
    :meth:`Evaluator._ingest_behind` says when), the round takes ``behind_share`` instead: an evaluation
    reads what storage has applied, so while records wait for it, evaluating sooner judges figures that
    are already old, and the CPU it takes is the CPU ingest lacks (on a machine whose cores are all
    busy, the broker's too). Measured by ``benchmarks/bench_scrape.py``'s live part (10,000 groups,
    78,000 commits/s, two workers on two cores with Prometheus scraping them): at half the loop, or
    giving way only on the records counted waiting (which that broker's offsets seldom showed), every
    record was applied 5.2-9.5 s after the last was published (seven runs, median 8.2 s); giving way on
    a late batch too, 4.7-6.6 s (four runs, median 5.2 s). The price is paid in evaluations: the
    workers did 2-3 times fewer during the live part.
    """

    def __init__(
        self,
        every: float = YIELD_EVERY,
        share: float = ROUND_SHARE,
        *,
        behind: Callable[[], Awaitable[bool]] | None = None,
        behind_share: float = BEHIND_SHARE,
        look_every: float = LOOK_EVERY,
        spent: Callable[[float], None] | None = None,
    ) -> None:
        """``spent``: told the CPU seconds of this thread the round itself spent, at each pause (what it
        spent since the last) and at :meth:`done`, so that a counter of it grows with the round rather
        than at its end (a round over thousands of groups runs for seconds)."""
        self._spent = spent
        self._every = every
        self._normal_share = share
        self._behind = behind
        self._behind_share = behind_share
        self._look_every = look_every
        self._next_look = -math.inf
        self.share = share
        """The share of the loop the round takes now."""
        self._since = time.monotonic()
        self._cpu_since = time.thread_time()
        """This thread's CPU time when the round last went on (its start, or the end of a pause)."""

    async def pause(self) -> None:
        """Leave the loop to other work if this round has run ``every`` s since the last pause."""
        now = time.monotonic()
        ran = now - self._since
        if ran < slice_length(self._every):
            return
        self.done()  # what the round spent so far is told now; the pause's own CPU is not the round's
        if self._behind is not None and now >= self._next_look:
            self._next_look = now + self._look_every
            self.share = self._behind_share if await self._behind() else self._normal_share
        await asyncio.sleep(ran * (1 - self.share) / self.share)
        await next_turn()
        self._cpu_since = time.thread_time()
        self._since = time.monotonic()

    async def elsewhere(self, step: Awaitable[T]) -> T:
        """Await ``step``, in which the event loop runs other work (a yield between two slices, a flush):
        like a pause's, its CPU is not the round's."""
        self.done()
        try:
            return await step
        finally:
            self._cpu_since = time.thread_time()

    def done(self) -> None:
        """The round has ended (or waits elsewhere): tell ``spent`` what it spent since its last pause."""
        cpu = time.thread_time()
        if self._spent is not None:
            self._spent(cpu - self._cpu_since)
        self._cpu_since = cpu


class Evaluator(Stage, OpenIncidentsReader):
    """Evaluates the held groups at their cadence, publishes what triggers and keeps their incidents."""

    name = "evaluator"

    def __init__(
        self,
        *,
        interval: float,
        policy: EvaluationPolicy,
        groups: GroupStateReader,
        changes: Channel[GroupChanged],
        states: GroupPartitionedTable,
        recommendations: TopicT,
        incidents: IncidentLog,
        history: RecommendationHistory,
        overview: GroupOverview,
        writer: ChangelogWriter,
        metrics: Metrics,
        cluster_name: str,
        worker_url: str,
        ingest: Sequence[ReportsProgress] = (),
    ) -> None:
        """``ingest``: the stages a long round gives way to while they are behind (:class:`RoundPacer`)."""
        self._interval = interval
        self._ingest = ingest
        metrics.evaluation_loop_share.set(ROUND_SHARE)
        self._policy = policy
        self._groups = groups
        self._changes = changes
        self._states = states
        self._recommendations = recommendations
        self._incidents = incidents
        self._history = history
        self._overview = overview
        self._worker_url = worker_url
        self._writer = writer
        self._metrics = metrics
        self._cluster = cluster_name
        self._last_evaluated: dict[str, float] = {}
        self._first_seen: dict[str, float] = {}
        """Groups held but never evaluated here -> when a round first saw them."""
        self._changed: dict[str, float] = {}
        """Groups storage said changed (anything but end offsets) since their last evaluation -> when the
        first of those changes was made (:attr:`GroupChanged.at`)."""
        self._dirty: set[str] = set()
        """Groups whose state changed (any notice, end offsets moving included) since their last evaluation."""
        self._quiet_until: dict[str, float] = {}
        """Groups whose last evaluation found them quiet -> until when an evaluation finds the same if
        nothing changes (:meth:`_quiet_until_after`)."""
        self._spread_out: set[str] = set()
        """Groups held that an evaluation found quiet since this worker holds them: their first horizon was
        drawn over the whole of it (:func:`refresh_after`)."""
        self._quiet_cost: float | None = None
        """The CPU seconds an evaluation that found its group quiet took, averaged (:meth:`_note_quiet_cost`):
        what refreshing a quiet group costs (:func:`refresh_after`)."""
        self._deleted: set[str] = set()
        """Groups storage said were deleted, whose incidents are still to resolve."""
        self._held: set[str] = set()
        """The groups held at the last scan (:meth:`_scan`)."""
        self._next_scan = 0.0
        self._last_scan = -math.inf
        self._scan_wanted = True
        """A notice named a group not held at the last scan, or a deleted one, since that scan."""
        self._held_partitions: frozenset[int] | None = None
        self._rescan_until = -math.inf
        self._schedule: list[tuple[float, str]] = []
        """A heap of (when a group may be due, the group): an entry for each group's next due time, made
        when it is evaluated, first seen or changed; entries that turn out not due are dropped."""
        self._stopped = False

    @property
    def tick(self) -> float:
        """How often to look for due groups."""
        return min(0.5, self._interval / 4)

    @property
    def scan_every(self) -> float:
        """How often to look at which groups this worker holds."""
        return min(5.0, self._interval / 2)

    def register(self, app: faust.App) -> None:
        @app.timer(self.tick, name="evaluate-groups")
        async def evaluate_groups() -> None:
            if self._stopped:  # the timer fires until Faust stops it, maybe after the producer stopped
                return
            try:
                await self.run_due()
            except ChangelogWriteError as exc:
                log.warning("evaluation: %s; the next flush sends them", exc)
            except PRODUCER_ERRORS as exc:
                log.error("evaluation: a recommendation was not sent: %r", exc)

    async def stop(self) -> None:
        self._stopped = True
        try:
            await self._writer.flush()
        except ChangelogWriteError as exc:
            log.warning("evaluator at stop: %s", exc)

    def open_incidents(self) -> list[Incident]:
        return self._incidents.open_incidents(self._groups.held_groups())

    async def _take_changes(self, pacer: RoundPacer) -> None:
        """Note the groups storage says changed; forget the state of those deleted. Thousands of notices
        wait at a round's start under live commits (each storage flush sends one per group it changed):
        they are taken a slice of the event loop at a time."""
        slices = LoopSlices()
        for notice in self._changes.drain():
            if slices.over():
                await pacer.elsewhere(slices.next())
            self._dirty.add(notice.group)
            if notice.group not in self._held or notice.change is GroupChange.DELETED:
                self._scan_wanted = True
            if notice.change is GroupChange.DELETED:
                self._writer.delete(self._states, notice.group)
                self._last_evaluated.pop(notice.group, None)
                self._first_seen.pop(notice.group, None)
                self._changed.pop(notice.group, None)
                self._deleted.add(notice.group)
            elif notice.change is not GroupChange.END_OFFSETS:  # those come every poll: not sooner than due
                self._deleted.discard(notice.group)
                if notice.group in self._changed:  # its entry is in the schedule since its first notice
                    continue
                self._changed[notice.group] = notice.at
                last = self._last_evaluated.get(notice.group)
                if last is not None:  # due half an interval after its last evaluation, if not holding
                    heapq.heappush(self._schedule, (last + self._interval / 2, notice.group))

    async def _resolve_deleted(self, held: set[str], now: float) -> None:
        """Resolve the incidents of the groups deleted since the last round (unless they came back)."""
        for group in sorted(self._deleted):
            if group not in held:
                observation = IncidentObservation(
                    group=group,
                    lag_unit=self._policy.lag_unit,
                    member_lag={},
                    gone=True,
                    skew=None,
                    rearm_below=self._policy.rearm_below,
                    recommendation=None,
                    health=group_status({}, group_gone_or_empty=True),
                )
                await self._incidents.forget(observation, now)
                self._history.forget(group)
                self._metrics.forget_group(self._cluster, group)
            self._deleted.discard(group)

    def _state(self, group: str) -> EvaluationState | None:
        raw = self._states.stored.get(group)  # the store's own dict: Faust's get costs about 15 µs a read
        return EvaluationState.model_validate_json(raw) if raw is not None else None

    def _due(self, group: str, now: float) -> float | None:
        """When ``group`` came due, if it is due at ``now``; None if it is not. Due: an interval since
        the last evaluation; or a change, half an interval since (or when the change was noticed, if
        later), while the trigger is not already holding (changes must not make a hold count faster). A
        group never evaluated here is a change seen when it was first seen: it is due half an interval
        after that, not at once (a worker reading a backlog of thousands of new groups evaluated each as
        it appeared, whatever ``KAGENT_EVALUATE_INTERVAL`` said)."""
        last = self._last_evaluated.get(group)
        if last is None:
            seen = self._first_seen.get(group)
            return seen + self._interval / 2 if seen is not None and now - seen >= self._interval / 2 else None
        since = now - last
        if since >= self._interval:
            return last + self._interval
        changed = self._changed.get(group)
        if changed is None or since < self._interval / 2:
            return None
        state = self._state(group)
        return max(last + self._interval / 2, changed) if state is None or state.held == 0 else None

    async def run_due(self) -> int:
        """Evaluate each held group that is due (see :meth:`_due`); how many were evaluated. Its CPU
        time is counted in ``kagent_evaluation_cpu_seconds`` as the round goes (at each of its pauses): the
        event loop thread's over the round, but for the pacer's pauses and the round's other waits
        (:class:`RoundPacer`, :meth:`RoundPacer.elsewhere`), in which the other work runs."""
        pacer = RoundPacer(behind=self._ingest_behind, spent=self._metrics.evaluation_cpu.inc)
        try:
            return await self._run_due(pacer)
        finally:
            pacer.done()

    async def _ingest_behind(self) -> bool:
        """Whether one of the ``ingest`` stages is behind: more than :data:`BEHIND_RECORDS` records wait
        for it, or the newest record of its last batch, applied within :data:`DELAY_HOLDS` s, waited more
        than :data:`BEHIND_SECONDS`. The share a long round takes from now on goes to
        ``kagent_evaluation_loop_share``. A figure that cannot be read now (None, or an error: a consumer
        mid-rebalance) is taken as not behind: this only paces the round, and the health stage reports
        such a stage."""
        behind = False
        for stage in self._ingest:
            delay = stage.delay
            if delay is not None and delay.seconds > BEHIND_SECONDS and time.time() - delay.applied_at <= DELAY_HOLDS:
                behind = True
                break
            try:
                backlog = await stage.backlog()
            except Exception:  # a sample that fails must not stop the round
                log.debug("evaluation: the backlog of stage %s not read", stage.name, exc_info=True)
                continue
            if backlog is not None and backlog > BEHIND_RECORDS:
                behind = True
                break
        self._metrics.evaluation_loop_share.set(BEHIND_SHARE if behind else ROUND_SHARE)
        return behind

    async def _run_due(self, pacer: RoundPacer) -> int:
        await self._take_changes(pacer)
        now = time.time()
        if self._scan_due(now):
            await self._scan(now, pacer)
        holds = self._groups.holding()
        due: dict[str, float] = {}
        """Each group due -> when it came due."""
        slices = LoopSlices()  # thousands of entries come due at once, each judged (_due may read its state)
        while self._schedule and self._schedule[0][0] <= now:
            if slices.over():
                await pacer.elsewhere(slices.next())
            _, group = heapq.heappop(self._schedule)
            if group in due or group not in self._held or not holds(group):
                continue
            came = self._due(group, now)
            if came is not None:
                due[group] = came
        evaluated = skipped = 0
        for group in sorted(due):
            at = time.time()  # a round over thousands of groups takes seconds: each is measured when it runs
            self._last_evaluated[group] = at
            self._first_seen.pop(group, None)
            self._changed.pop(group, None)
            heapq.heappush(self._schedule, (at + self._interval, group))
            if group not in self._dirty and at < self._quiet_until.get(group, -math.inf):
                skipped += 1  # it would find what its last evaluation found
                continue
            self._metrics.evaluation_delay.observe(max(0.0, at - due[group]))
            with waits_through(pacer.elsewhere):  # its waits on the broker are not the round's CPU
                await self.evaluate_group(group, at)
            evaluated += 1
            await pacer.pause()  # the web server, heartbeats and the other stages run meanwhile
            if self._stopped:
                break
        await pacer.elsewhere(self._writer.flush())  # no-op when no state changed
        if skipped:
            self._metrics.evaluations_skipped.inc(skipped)
        return evaluated

    def _scan_due(self, now: float) -> bool:
        """Whether to look at which groups this worker holds now: at most every :attr:`scan_every`
        s, and only when a notice named a group not held at the last look or a deleted one, within
        :data:`RESCAN_AFTER_REBALANCE` s of this worker's partitions changing, or
        :data:`SCAN_AT_LEAST_EVERY` s after the last look (at 50,000 groups a look costs about
        120 ms: every 5 s, that was 1.4 s of CPU a minute over groups that had not changed)."""
        partitions = self._groups.held_partitions()
        if partitions != self._held_partitions:
            self._held_partitions = partitions
            self._rescan_until = now + RESCAN_AFTER_REBALANCE
            return True
        if now < self._next_scan:
            return False
        return self._scan_wanted or now < self._rescan_until or now - self._last_scan >= SCAN_AT_LEAST_EVERY

    async def _scan(self, now: float, pacer: RoundPacer) -> None:
        """Look at which groups this worker holds (see :meth:`_scan_due`): forget those it no longer
        holds, resolve the incidents of those deleted, and schedule those new here half an interval on."""
        self._scan_wanted = False
        held: set[str] = set()  # a set: their order does not matter
        slices = LoopSlices()
        for run in self._groups.held_group_runs():
            if slices.over():
                await pacer.elsewhere(slices.next())
            held.update(run)
        self._held = held
        self._next_scan = now + self.scan_every
        self._last_scan = now
        await self._resolve_deleted(held, now)
        self._first_seen = {group: seen for group, seen in self._first_seen.items() if group in held}
        for group in list(self._last_evaluated):
            if group not in held:
                del self._last_evaluated[group]
                self._overview.forget(group)
                self._metrics.forget_group(self._cluster, group)
        self._changed = {group: at for group, at in self._changed.items() if group in held}
        self._dirty &= held
        self._quiet_until = {group: until for group, until in self._quiet_until.items() if group in held}
        self._spread_out &= held
        for group in held:
            if group not in self._last_evaluated and group not in self._first_seen:
                self._first_seen[group] = now
                heapq.heappush(self._schedule, (now + self._interval / 2, group))
        if len(self._schedule) > 4 * len(held) + 1_000:  # entries made stale by changes and evaluations
            self._schedule = [entry for entry in self._schedule if entry[1] in held]
            heapq.heapify(self._schedule)

    async def evaluate_group(self, group: str, now: float) -> Recommendation | None:
        """Evaluate one group; store its trigger state if it changed; publish a recommendation if it
        triggers. A recommendation a previous holder decided but may not have sent goes out first."""
        started = time.thread_time()
        self._dirty.discard(group)
        self._quiet_until.pop(group, None)
        snapshot = self._groups.snapshot(group, now)
        if snapshot is None:
            return None
        state = self._state(group)
        resent = None
        if state is not None and state.pending_recommendation is not None:
            resent = state.pending_recommendation
            state = await self._publish(group, state)
        with self._metrics.evaluation_seconds.time():
            # Hot partitions are judged from the rates, and scaling when the policy asks (scale_headroom);
            # the members' drain times need them too.
            throughput = self._groups.throughput(snapshot, self._policy.rate_window)
            evaluation = evaluate(snapshot, state, self._policy, now, throughput)
            new_state, recommendation, skew = evaluation.state, evaluation.recommendation, evaluation.skew
            proposal, scale, hot = evaluation.proposal, evaluation.scale, evaluation.hot
        self._metrics.evaluations.inc()
        if recommendation is not None:
            new_state = new_state.model_copy(update={"pending_recommendation": recommendation})
            self._history.add(recommendation)
        if new_state != state:
            self._writer.set(self._states, group, new_state.model_dump_json().encode())
        if recommendation is not None:
            self._metrics.recommendations.inc()
            log.info("recommendation %s for group %s", recommendation.id, group)
            await self._publish(group, new_state)
        health = self._groups.health(snapshot, now)
        gauges = self._metrics.group_gauges
        known_status = health.status is not GroupStatus.UNKNOWN
        gauges.set_status(self._cluster, group, health.status.severity if known_status else None)
        judged = proposal is not None and not proposal.unknown
        gauges.set_recommended_skew(self._cluster, group, evaluation.recommended_skew)
        needed = scale.members_needed if scale is not None else len(snapshot.assignment.members)
        gauges.set_recommended_members(self._cluster, group, needed if judged else None)
        unit = self._policy.lag_unit
        rows, rest = evaluation.member_rows
        every_row = [*rows, *([rest] if rest is not None else [])]
        drains = {
            row.member_id: member_drain(row.offset_lag, [throughput.get(tp) for tp in row.partitions or ()])
            for row in every_row
        }
        gauges.set_member_drain(
            self._cluster,
            group,
            [
                MemberDrain(row.client_host, row.member_id, row.client_id, seconds)
                for row in every_row
                if (seconds := drains[row.member_id].metric_value) is not None
            ],
        )
        gauges.set_hot_partitions(
            self._cluster,
            group,
            [
                HotPartitionFigures(rate.topic, rate.partition, rate.production_rate, hot.best_capacity)
                for rate in hot.partitions
            ]
            if hot is not None
            else [],
        )
        observation = IncidentObservation(
            group=group,
            lag_unit=unit,
            member_lag={row.member_id: value for row in every_row if (value := unit_lag(row, unit)) is not None},
            gone=False,
            skew=skew,
            rearm_below=self._policy.rearm_below,
            recommendation=recommendation or resent,
            health=health,
            falls_behind=scale is not None,
            hot=hot is not None,
            drain=slowest(drains.values()),
            member_drain=drains,
        )
        for transition in await self._incidents.observe(observation, now):
            log.info(
                "incident %s (%s) of group %s: %s, %s",
                transition.incident.id,
                transition.incident.kind.value,
                group,
                transition.action.value,
                transition.reason,
            )
        open_incidents = self._incidents.open_incidents([group])
        sent = recommendation is not None or resent is not None
        quiet_until = self._quiet_until_after(
            snapshot, new_state, sent, scale is not None or hot is not None, skew, now
        )
        if quiet_until is not None:
            self._quiet_until[group] = quiet_until
        self._overview.record(
            summarize(
                snapshot,
                status=health.status,
                skew=skew,
                skew_metric=self._policy.skew_metric,
                lag_unit=self._policy.lag_unit,
                min_total_lag=self._policy.min_total_lag,
                state=new_state,
                incidents=open_incidents,
                worker=self._worker_url,
            )
        )
        if quiet_until is not None:
            self._note_quiet_cost(time.thread_time() - started)
        return recommendation

    def _quiet_until_after(
        self,
        snapshot: GroupSnapshot,
        state: EvaluationState,
        sent: bool,
        falls_behind: bool,
        skew: float | None,
        now: float,
    ) -> float | None:
        """Until when an evaluation would find what this one found (``state`` after it; whether it
        ``sent`` a recommendation; whether the group ``falls_behind``: scale evidence or a hot partition; its
        ``skew``), if nothing the group
        reads changes; None if the next one may differ anyway.

        Quiet: its skew measured (a group not yet measured is looked at again at its due time: its end
        offsets' staleness moves with the clock), nothing sent or to send, the trigger not counting a
        hold, the members keeping up (their
        rates are measured over a window that slides with the clock), and the lag in records (time lag
        grows with the clock). The trigger state then moves only with the skew, except that a disarmed
        group whose skew has cleared re-arms when its cooldown ends; incidents move only with what is
        observed (:func:`kagent.core.incidents.step`); the status moves only with the inputs until a
        partition's silence can mean STOP (:meth:`GroupStateReader.status_holds_until`)."""
        if (
            sent
            or skew is None
            or state.pending_recommendation is not None
            or state.held
            or falls_behind
            or self._policy.lag_unit is not LagUnit.MESSAGES
        ):
            return None
        first = state.group not in self._spread_out
        if first:
            self._spread_out.add(state.group)
        refresh = refresh_after(len(self._held), self._quiet_cost, self._interval, random.random(), first)
        until = min(now + refresh, self._groups.status_holds_until(snapshot))
        if not state.armed and state.cleared:
            until = min(until, (state.last_recommendation_at or 0.0) + self._policy.cooldown)
        return until if until > now else None

    def _note_quiet_cost(self, cpu: float) -> None:
        """Take ``cpu``, the CPU seconds of an evaluation that found its group quiet (this thread's: such an
        evaluation sends nothing, so it seldom waits), into :attr:`_quiet_cost`: a moving average over about
        the last thousand."""
        self._quiet_cost = cpu if self._quiet_cost is None else self._quiet_cost + (cpu - self._quiet_cost) / 1_000

    async def _publish(self, group: str, state: EvaluationState) -> EvaluationState:
        """Send ``state``'s pending recommendation once the state holding it is durable (an outbox);
        returns the state without it, written when the broker has the recommendation."""
        recommendation = state.pending_recommendation
        assert recommendation is not None
        await waited(self._writer.flush())
        sent = await waited(
            self._recommendations.send(key=group.encode(), value=recommendation.model_dump_json().encode())
        )
        await waited(sent)
        cleared = state.model_copy(update={"pending_recommendation": None})
        self._writer.set(self._states, group, cleared.model_dump_json().encode())
        return cleared
