"""Objects left out of the cyclic garbage collector's watch: what a worker keeps or holds across many
turns of its event loop and can be in no reference cycle.

CPython's cyclic collector goes over every container object it watches (tuples, lists, dicts, sets and
every class instance) each time that object's generation is collected. Reference counting frees what is
not in a cycle whatever the collector watches, so an object that can be in no cycle (it holds only
strings, numbers, bytes and other such objects, and nothing is put in it later that could lead back to
it) costs the collector a visit at each collection and gains nothing from it. A worker keeps tens of
such objects per group (each group's members, its scrape layout and the sums that go with it, its
gauges' figures, its listing for the API, its skew history): at 5,000 groups a worker, made by the
first round of evaluations, scrapes and polls after a start, they were nearly all of the 272,000-279,000
objects the first middle collection went over (0.39-0.42 s; ``benchmarks/bench_scrape.py``'s live part
at 10,000 groups); left out, 32,000 (0.08-0.1 s). At a million group-partitions
(``bench_scrape.py --groups 50000 --pool half``) the collector held the worker 6.1 s over the run, its
middle collections 2.3 s (the longest up to 1 s); with them left out, 2.5 s and 0.46 s (each under
0.1 s). Objects the collector does not watch are not gone over at all.

CPython stops watching an exact tuple by itself only once a collection finds nothing in it but strings,
numbers, bytes and such tuples (a named tuple in it, a ``TopicPartition`` say, keeps it watched, watched
or not itself), and a dict of such keys and values it does not watch; a list, a set, a named tuple and a
class instance it watches for as long as they live, unless told otherwise (:func:`untrack`).
"""

from __future__ import annotations

from kagent.core.lag_twins import twin_of

__all__ = ["untrack"]


def _untrack(objects: list[object]) -> None:
    """Leave each of ``objects`` (not what it holds) out of the garbage collector's watch; the caller vouches
    that none can be in a reference cycle, now or after (a container that something could later be put in
    that leads back to it must stay watched). Reference counting frees them as ever.

    Among them, the source's fetched ``__consumer_offsets`` records (aiokafka's ``ConsumerRecord``: names,
    numbers, bytes and a tuple of headers): a fetch holds up to 100,000 of them until its events are sent,
    across many turns of the event loop; watched, each young collection meanwhile went over them all
    (25,000-48,000 of the 30,000-51,000 objects it went over on a live worker, 20-130 ms each;
    ``benchmarks/bench_scrape.py``'s live part, 10,000 groups), and those that outlived one filled the
    middle generation, whose collections then took 0.5-0.9 s.

    Compiled where built (``_events_twins.pyx``). CPython gives Python no way to untrack an object, so this
    function leaves them as they are: nothing else differs."""


untrack = twin_of(_untrack, "kagent.core._events_twins")
