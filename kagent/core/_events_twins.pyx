# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of the two ends of the derived events: kagent.core.ingest.ingest, the source's reading of
__consumer_offsets, and kagent.core.events._plain_run, storage's check of each commit run it reads; of
aiokafka's murmur2, by which a group's events are placed (kagent.core.table_keys.murmur2, which the
lag-sticky assignor also asks of every member id at every evaluation); and of storage's per-commit
steps, kagent.core.table_keys._partition_key (the committed-offsets table's key) and
kagent.core.events._gathered_runs (a group's commit runs gathered by partition); and of
kagent.core.collector._untrack (what a worker holds or keeps that can be in no reference cycle left out
of the garbage collector's watch, which Python cannot do).

Each returns exactly what its Python function returns for the same arguments (kagent.core.ingest,
kagent.core.events and kagent.core.table_keys state the contract; tests/unit/test_events_twins.py checks it).

ingest: an offset commit whose bytes and fields are
plainly valid (record type 0 or 1, a value of version 0-4 with no tagged field, ASCII metadata, a topic
name of the legal characters, every bound of kagent.core.record_checks.checked_commit met) is read here
in place, and extends its group's run as the Python function's loop does; every other record (a
tombstone, group metadata, anything malformed, anything in doubt) goes through the Python function's
own step, kagent.core.ingest._ingest_one, so every verdict and every reason is the Python's.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeASCII, PyUnicode_DecodeUTF8
from libc.string cimport memcmp, memcpy

cdef object _ingest_one = None  # kagent.core.ingest._ingest_one, at the first call
cdef object _finished = None  # kagent.core.ingest._finished
cdef Py_ssize_t _unmeasured = 0  # kagent.core.record_checks._UNMEASURED

cdef enum:
    LONGEST_TOPIC = 249  # Kafka's longest topic name


cdef inline long long _int(const unsigned char *p, int size) noexcept:
    """The big-endian signed integer of ``size`` (2, 4 or 8) bytes at ``p``."""
    cdef unsigned long long value = 0
    cdef int i
    for i in range(size):
        value = (value << 8) | p[i]
    if size < 8 and value >> (8 * size - 1):
        return <long long>value - (1LL << (8 * size))
    return <long long>value


cdef bint _legal_topic(const unsigned char *p, Py_ssize_t size) noexcept:
    """Whether ``size`` bytes at ``p`` are a legal topic name (record_checks' rule: 1-249 of
    [a-zA-Z0-9._-], not "." or "..")."""
    cdef Py_ssize_t i
    cdef unsigned char c
    if size < 1 or size > LONGEST_TOPIC:
        return False
    if p[0] == b'.' and (size == 1 or (size == 2 and p[1] == b'.')):
        return False
    for i in range(size):
        c = p[i]
        if not (
            (b'a' <= c <= b'z') or (b'A' <= c <= b'Z') or (b'0' <= c <= b'9') or c == b'.' or c == b'_' or c == b'-'
        ):
            return False
    return True


cdef bint _ascii(const unsigned char *p, Py_ssize_t size) noexcept:
    cdef Py_ssize_t i
    for i in range(size):
        if p[i] >= 0x80:
            return False
    return True


cdef struct _Commit:
    Py_ssize_t group_at, group_len, topic_at, topic_len
    long long partition, offset, timestamp, epoch  # epoch -1: none


cdef bint _plain_commit(
    const unsigned char *k, Py_ssize_t klen, const unsigned char *v, Py_ssize_t vlen, _Commit *c
) noexcept:
    """Whether key ``k`` and value ``v`` are a plainly valid offset commit (see the module), read into ``c``
    (the names as where they lie in ``k``); False at the first doubt."""
    cdef Py_ssize_t pos, meta_len, end
    cdef int version
    # The key: record type 0 or 1, group, topic, partition, nothing after.
    if klen < 4 or k[0] != 0 or k[1] > 1:
        return False
    c.group_at, c.group_len = 4, _int(k + 2, 2)
    c.topic_at = c.group_at + c.group_len + 2
    if c.group_len < 0 or c.group_len > _unmeasured or c.topic_at > klen:
        return False
    c.topic_len = _int(k + c.topic_at - 2, 2)
    if c.topic_len < 0 or c.topic_at + c.topic_len + 4 != klen or not _legal_topic(k + c.topic_at, c.topic_len):
        return False
    c.partition = _int(k + c.topic_at + c.topic_len, 4)
    # The value: its version's fields, nothing after.
    if vlen < 10 or v[0] != 0 or v[1] > 4:
        return False
    version, pos, c.epoch = v[1], 2, -1
    c.offset = _int(v + pos, 8)
    pos += 8
    if version >= 3:
        if vlen < pos + 4:
            return False
        c.epoch = _int(v + pos, 4)
        pos += 4
    if version == 4:  # a compact string: its length + 1 as an unsigned varint, of one byte here
        if vlen < pos + 1 or v[pos] == 0 or v[pos] >= 0x80:
            return False
        meta_len = v[pos] - 1
        pos += 1
    else:
        if vlen < pos + 2:
            return False
        meta_len = _int(v + pos, 2)
        pos += 2
    if meta_len < 0 or vlen < pos + meta_len + 8 or not _ascii(v + pos, meta_len):
        return False
    pos += meta_len
    c.timestamp = _int(v + pos, 8)
    pos += 8
    end = pos + (8 if version == 1 else 1 if version == 4 else 0)  # v1's expire timestamp, v4's tags
    if end != vlen or (version == 4 and v[pos] != 0):
        return False
    # checked_commit's bounds (the topic's rule is above; a group this short is within its own).
    return c.partition >= 0 and c.offset >= -1 and c.epoch >= -1


def ingest(records, skip_groups):
    """The twin of kagent.core.ingest.ingest (see the module)."""
    global _ingest_one, _finished, _unmeasured
    if _ingest_one is None:
        from kagent.core import ingest as python, record_checks

        _ingest_one, _finished, _unmeasured = python._ingest_one, python._finished, record_checks._UNMEASURED
    cdef dict grouped = {}
    cdef dict runs = {}
    cdef list malformed = []
    cdef bytes key
    cdef const unsigned char *k
    cdef _Commit c
    cdef object group = None, topic = None, leader_epoch, where, run, open_runs, events
    cdef bytes group_key = None  # the key the last group name was read from
    cdef Py_ssize_t group_key_len = -1
    cdef bytes topic_key = None  # the key the last topic name was read from, and where it lies there
    cdef Py_ssize_t topic_key_at = 0, topic_key_len = -1
    for record in records:
        raw_key, value = record.key, record.value
        if (
            type(raw_key) is not bytes
            or type(value) is not bytes
            or not _plain_commit(
                <const unsigned char *>PyBytes_AS_STRING(raw_key),
                PyBytes_GET_SIZE(raw_key),
                <const unsigned char *>PyBytes_AS_STRING(value),
                PyBytes_GET_SIZE(value),
                &c,
            )
        ):
            _ingest_one(record, skip_groups, grouped, runs, malformed)
            continue
        key = raw_key
        k = <const unsigned char *>PyBytes_AS_STRING(key)
        # The group's name: the last one again if its bytes are the same.
        if c.group_len != group_key_len or memcmp(k + c.group_at, PyBytes_AS_STRING(group_key) + c.group_at, c.group_len):
            try:
                group = PyUnicode_DecodeUTF8(<const char *>k + c.group_at, c.group_len, NULL)
            except UnicodeDecodeError:
                _ingest_one(record, skip_groups, grouped, runs, malformed)
                continue
            group_key, group_key_len = key, c.group_len
        if c.topic_len != topic_key_len or memcmp(k + c.topic_at, PyBytes_AS_STRING(topic_key) + topic_key_at, c.topic_len):
            topic = PyUnicode_DecodeASCII(<const char *>k + c.topic_at, c.topic_len, NULL)
            topic_key, topic_key_at, topic_key_len = key, c.topic_at, c.topic_len
        # The Python function's commit path, step for step.
        if group in skip_groups:
            continue
        open_runs = runs.get(group)
        if open_runs is None:
            open_runs = runs[group] = {}
        where = (topic, c.partition)
        run = open_runs.get(where)
        leader_epoch = None if c.epoch == -1 else c.epoch
        if run is None:
            open_runs[where] = run = [topic, c.partition, c.offset, c.timestamp, leader_epoch]
            events = grouped.get(group)
            if events is None:
                events = grouped[group] = []
            events.append(run)
        else:
            run += (c.offset, c.timestamp, leader_epoch)
    return _finished(grouped, malformed)


def plain_run(list item):
    """The twin of kagent.core.events._plain_run: the same checks, read from the list in place."""
    cdef Py_ssize_t size = len(item), field
    if size < 5 or size % 3 != 2 or type(item[0]) is not str or type(item[1]) is not int or item[1] < 0:
        return False
    for field in range(2, size, 3):
        if type(item[field]) is not int or type(item[field + 1]) is not int:
            return False
        epoch = item[field + 2]
        if epoch is not None and type(epoch) is not int:
            return False
    return True


cdef object _murmur2 = None  # aiokafka's murmur2, at the first call that needs it


def murmur2(data):
    """The twin of aiokafka.partitioner.murmur2 (Kafka's hash of a record's key): the same unsigned 32-bit
    hash of ``bytes``, in C; anything else (a bytearray, say) goes to aiokafka's."""
    global _murmur2
    cdef const unsigned char *p
    cdef Py_ssize_t length, i
    cdef unsigned int m = 0x5BD1E995, h, k, extra
    if type(data) is not bytes or PyBytes_GET_SIZE(data) > 0xFFFFFFFF:
        if _murmur2 is None:
            from aiokafka.partitioner import murmur2 as python

            _murmur2 = python
        return _murmur2(data)
    p = <const unsigned char *>PyBytes_AS_STRING(data)
    length = PyBytes_GET_SIZE(data)
    h = 0x9747B28C ^ <unsigned int>length
    for i in range(0, length - length % 4, 4):
        k = p[i] | (<unsigned int>p[i + 1] << 8) | (<unsigned int>p[i + 2] << 16) | (<unsigned int>p[i + 3] << 24)
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    extra = length % 4
    i = length - extra
    if extra >= 3:
        h ^= <unsigned int>p[i + 2] << 16
    if extra >= 2:
        h ^= <unsigned int>p[i + 1] << 8
    if extra >= 1:
        h ^= p[i]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return h


# -- storage's per-commit path: a group-partition's table key, a group's commit runs ----------------------

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object value, int *overflow) except? -1
    bint PyUnicode_IS_ASCII(object text)
    Py_ssize_t PyUnicode_GET_LENGTH(object text)
    void *PyUnicode_DATA(object text)
    object PyUnicode_New(Py_ssize_t size, unsigned int most)
    object PyList_GetSlice(object items, Py_ssize_t low, Py_ssize_t high)
    void PyObject_GC_UnTrack(object op)
    bint PyObject_IS_GC(object op)

cdef object _python_partition_key = None  # kagent.core.table_keys._partition_key: any name it must escape


cdef inline bint _plain_name(str name) noexcept:
    """Whether json.dumps writes ``name`` as it is between its quotes: ASCII, no quote, backslash or control
    character."""
    cdef const unsigned char *p
    cdef Py_ssize_t index
    if not PyUnicode_IS_ASCII(name):
        return False
    p = <const unsigned char *>PyUnicode_DATA(name)
    for index in range(PyUnicode_GET_LENGTH(name)):
        if p[index] < 0x20 or p[index] == b'"' or p[index] == b'\\' or p[index] == 0x7F:
            return False
    return True


def partition_key(group, topic, partition):
    """The twin of kagent.core.table_keys._partition_key: the same text, written here for an exact int
    ``partition`` of at most 18 digits and str names json writes as they are (ASCII, nothing to escape);
    anything else goes to the Python function."""
    global _python_partition_key
    cdef Py_ssize_t group_size, topic_size, digits = 0, index
    cdef long long number
    cdef int overflow = 0
    cdef char text[24]
    cdef unsigned char *out
    if type(group) is str and type(topic) is str and type(partition) is int:
        number = PyLong_AsLongLongAndOverflow(partition, &overflow)
        if overflow == 0 and 0 <= number < 1_000_000_000_000_000_000 and _plain_name(group) and _plain_name(topic):
            while True:
                text[digits] = <char>(48 + number % 10)
                digits += 1
                number //= 10
                if number == 0:
                    break
            group_size, topic_size = PyUnicode_GET_LENGTH(group), PyUnicode_GET_LENGTH(topic)
            key = PyUnicode_New(group_size + topic_size + digits + 8, 127)  # ["group","topic",digits]
            out = <unsigned char *>PyUnicode_DATA(key)
            out[0], out[1] = b'[', b'"'
            out += 2
            memcpy(out, PyUnicode_DATA(group), group_size)
            out += group_size
            out[0], out[1], out[2] = b'"', b',', b'"'
            out += 3
            memcpy(out, PyUnicode_DATA(topic), topic_size)
            out += topic_size
            out[0], out[1] = b'"', b','
            out += 2
            for index in range(digits):
                out[index] = text[digits - 1 - index]
            out[digits] = b']'
            return key
    if _python_partition_key is None:
        from kagent.core.table_keys import _partition_key

        _python_partition_key = _partition_key
    return _python_partition_key(group, topic, partition)


cdef object _TopicPartition = None  # aiokafka's TopicPartition, at the first call
cdef object _new_tuple = tuple.__new__


def untrack(list objects):
    """The twin of kagent.core.collector._untrack: each of ``objects`` that the garbage collector watches is
    left out of its watch (the caller vouches that none can be in a reference cycle)."""
    for each in objects:
        if PyObject_IS_GC(each):
            PyObject_GC_UnTrack(each)


def gathered_runs(tuple events, Py_ssize_t start, dict commits):
    """The twin of kagent.core.events._gathered_runs: the commit runs (lists) of ``events`` from ``start``
    added to ``commits`` as that function adds them, up to the first event that is not a list; its index
    (the length of ``events`` when there is none).

    Each partition's key and list of fields it adds are left out of the garbage collector's watch: a key
    holds a topic name and a partition number, a list only a commit's numbers (the run's fields, checked as
    ints or None where the record was read), so neither can be in a reference cycle. Storage gathers a whole
    batch's commits before it applies them (tens of thousands of partitions), and a batch lives across
    many turns of the event loop: watched, they were half of what each young collection went over on a live
    worker (``benchmarks/bench_scrape.py``'s live part, 10,000 groups)."""
    global _TopicPartition
    cdef Py_ssize_t index, size = len(events)
    cdef list run
    if _TopicPartition is None:
        from aiokafka.structs import TopicPartition

        _TopicPartition = TopicPartition
    for index in range(start, size):
        event = events[index]
        if type(event) is not list:
            return index
        run = <list>event
        key = (run[0], run[1])
        waiting = commits.get(key)
        if waiting is None:
            partition = _new_tuple(_TopicPartition, key)
            fields = PyList_GetSlice(run, 2, len(run))
            PyObject_GC_UnTrack(partition)
            PyObject_GC_UnTrack(fields)
            commits[partition] = fields
        else:
            (<list>waiting).extend(PyList_GetSlice(run, 2, len(run)))
    return size
