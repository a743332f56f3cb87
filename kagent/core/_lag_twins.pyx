# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of kagent.core.committed_offset.offsets_of, kagent.core.time_lag.measured_lags,
kagent.core.lag_series.lag_sums, kagent.core.lag_series.partition_pieces, kagent.core.member_lag.read_lags,
kagent.core.member_lag.partition_rows, kagent.core.lag_series.member_pieces,
kagent.core.committed_offset.applied, kagent.core.committed_offset._window_of,
kagent.core.throughput.partition_throughput, kagent.core.group_health._judged and
kagent.core.group_listing._merged_body.

Each function returns exactly what its Python twin returns for the same arguments (kagent.core.lag_twins
states the contract; tests/unit/test_lag_twins.py and tests/unit/test_listing_twin.py check it). Offsets
are Kafka's int64 and the end-offset history's points are read in place from its arrays (array("q")
offsets, array("d") times), so the interpolation is the Python twin's, operation for operation, in doubles.
"""

from cpython cimport array
from cpython.mem cimport PyMem_Calloc
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE, PyTuple_New
from libc.math cimport NAN, fabs, floor, round
from libc.string cimport memcmp, memcpy

from aiokafka.structs import TopicPartition as _TopicPartition

from kagent.core.exposition import go_float, go_int

cdef object _offset_of = None  # kagent.core.committed_offset.offset_of, at the first call
cdef tuple _names = None  # the three families' names, from kagent.core.lag_series at the first call


cdef extern from "Python.h":
    const char *PyBytes_AsString(object raw) except NULL

cdef extern from *:
    bint __builtin_saddll_overflow(long long a, long long b, long long *result) nogil


cdef enum:
    INT_DIGITS = 18  # an integer of a stored value read here has at most this many digits (below 10**18)


cdef inline bint _literal(const char *text, Py_ssize_t size, Py_ssize_t *at, const char *literal, Py_ssize_t length) noexcept:
    if at[0] + length > size or memcmp(text + at[0], literal, length) != 0:
        return False
    at[0] += length
    return True


cdef bint _int_text(const char *text, Py_ssize_t size, Py_ssize_t *at, long long *number) noexcept:
    """An integer as orjson writes one (no leading zero, no "-0"), of at most INT_DIGITS digits."""
    cdef Py_ssize_t index = at[0], first
    cdef long long value = 0
    cdef bint negative = index < size and text[index] == b'-'
    index += negative
    first = index
    while index < size and 48 <= text[index] <= 57 and index - first <= INT_DIGITS:
        value = value * 10 + (text[index] - 48)
        index += 1
    if index == first or index - first > INT_DIGITS or (text[first] == b'0' and (index - first > 1 or negative)):
        return False
    number[0] = -value if negative else value
    at[0] = index
    return True


def offsets_of(values):
    """The twin of kagent.core.committed_offset.offsets_of: a value that begins {"offset":N, with N as
    _int_text reads it is read here; any other goes to offset_of (the regex, or the whole value decoded)."""
    global _offset_of
    if _offset_of is None:  # not at import: kagent.core.committed_offset imports this module
        from kagent.core.committed_offset import offset_of

        _offset_of = offset_of
    cdef list offsets = []
    cdef const char *text
    cdef Py_ssize_t size, at
    cdef long long number
    for raw in values:
        if raw is None:
            offsets.append(None)
            continue
        if type(raw) is bytes:
            text = PyBytes_AsString(raw)
            size = len(<bytes>raw)
            at = 0
            if (
                _literal(text, size, &at, b'{"offset":', 10)
                and _int_text(text, size, &at, &number)
                and _literal(text, size, &at, b',', 1)
            ):
                offsets.append(number)
                continue
        offsets.append(_offset_of(raw))
    return offsets


cdef Py_ssize_t _after_offset(long long *offsets, Py_ssize_t size, long long position) noexcept:
    """bisect_right(offsets, position)."""
    cdef Py_ssize_t low = 0, high = size, middle
    while low < high:
        middle = (low + high) >> 1
        if position < offsets[middle]:
            high = middle
        else:
            low = middle + 1
    return low


cdef double _time_at(long long *offsets, double *times, Py_ssize_t size, long long position) noexcept:
    """kagent.core.time_lag.EndOffsetHistory.time_at of a position below the newest point (size >= 2): NAN
    where that is None (a history whose log end never moved)."""
    cdef Py_ssize_t left, right = _after_offset(offsets, size, position)
    cdef long long rise
    if right == 0:  # older than the history: along its whole rate
        left, right = 0, size - 1
    else:
        left = right - 1
    rise = offsets[right] - offsets[left]
    if rise <= 0:
        return NAN
    return times[left] + <double>(position - offsets[left]) * (times[right] - times[left]) / <double>rise


cdef object _time_lag(object history, long long position, double now):
    """kagent.core.time_lag.time_lag, for a position below the newest point or not."""
    cdef array.array offsets_array = history._offsets
    cdef array.array times_array = history._times
    cdef Py_ssize_t size = len(offsets_array)
    cdef long long *offsets = offsets_array.data.as_longlongs
    cdef double *times = times_array.data.as_doubles
    cdef double appended, waited
    if size and position >= offsets[size - 1]:
        return 0.0
    if size < 2:
        return None
    appended = _time_at(offsets, times, size, position)
    if appended != appended:  # NAN: unknown
        return None
    waited = floor((now - appended) * 1000 + 0.5) / 1000  # whole milliseconds
    return waited if waited > 0.0 else 0.0


# -- an evaluation's rates of a partition (kagent.core.throughput.partition_throughput) ----------------------

cdef object _python_partition_throughput = None  # kagent.core.throughput._partition_throughput, at the first call
cdef object _PartitionThroughput = None
cdef double _rate_window = 0.0  # kagent.core.throughput.RATE_WINDOW
cdef long long OFFSET_LIMIT = 1LL << 62  # a commit's offset taken here is below it (and at least 0): no sum overflows


cdef object _production_rate(long long *offsets, double *times, Py_ssize_t size, double now, double window):
    """kagent.core.throughput.production_rate of a history's arrays."""
    cdef double start, at_start, rate
    cdef Py_ssize_t low, high, middle, left, right
    if size < 2:
        return None
    start = now - window
    if not start > times[0]:  # max(times[0], now - window): the first unless the second is larger
        start = times[0]
    if start >= times[size - 1]:
        return None
    low, high = 0, size
    while low < high:  # bisect_right(times, start): times rise strictly, so 1 <= low <= size - 1 here
        middle = (low + high) >> 1
        if start < times[middle]:
            high = middle
        else:
            low = middle + 1
    right = low
    left = right - 1
    at_start = <double>offsets[left] + (start - times[left]) * <double>(offsets[right] - offsets[left]) / (
        times[right] - times[left]
    )
    rate = (<double>offsets[size - 1] - at_start) / (times[size - 1] - start)
    return rate if rate > 0.0 else 0.0


cdef bint _appended_before(long long *offsets, double *times, Py_ssize_t size, long long offset, double before) noexcept:
    """kagent.core.throughput._behind: whether EndOffsetHistory.time_at(offset) is known and below ``before``."""
    if size < 2 or offset >= offsets[size - 1]:
        return False
    return _time_at(offsets, times, size, offset) < before  # NAN (unknown) is below nothing


def partition_throughput(history, commits, now, since=None, window=None):
    """The twin of kagent.core.throughput.partition_throughput, for a ``now``, ``since`` and ``window`` given as
    floats (or left to their defaults), a history of offsets of at least 0, and commits whose offsets are at least
    0 and below 2**62 and whose timestamps are floats; any other arguments go to the Python twin."""
    global _python_partition_throughput, _PartitionThroughput, _rate_window
    if _python_partition_throughput is None:  # not at import: kagent.core.throughput imports this module
        from kagent.core.throughput import RATE_WINDOW, PartitionThroughput, _partition_throughput

        _python_partition_throughput, _PartitionThroughput, _rate_window = (
            _partition_throughput, PartitionThroughput, RATE_WINDOW
        )
    if window is None:
        window = _rate_window
    if type(now) is not float or type(window) is not float or (since is not None and type(since) is not float):
        return _python_partition_throughput(history, commits, now, since, window)
    cdef double at = now, span = window, start, elapsed, rate, first_stamp = 0.0, last_stamp = 0.0, stamp
    cdef double earlier_stamp = 0.0, before_stamp = 0.0, min_distance
    cdef long long first_offset = 0, last_offset = 0, before_offset = 0, offset
    cdef Py_ssize_t size = 0, counted = 0, least
    cdef long long *offsets = NULL
    cdef double *times = NULL
    cdef array.array offsets_array, times_array
    cdef bint busy = False, has_history = history is not None
    cdef tuple observations
    produced = None
    if has_history:
        offsets_array = history._offsets
        times_array = history._times
        size = len(offsets_array)
        offsets = offsets_array.data.as_longlongs
        times = times_array.data.as_doubles
        if size and offsets[0] < 0:  # the offsets never fall (a history starts again where one does)
            return _python_partition_throughput(history, commits, now, since, window)
        produced = _production_rate(offsets, times, size, at, span)
    if commits is None:
        return _PartitionThroughput(produced, None, False)  # positional: half the cost of keywords
    observations = commits.commits
    start = at - span
    if since is not None and <double>since > start:  # max(now - window, since)
        start = since
    busy = has_history
    for commit in observations:
        stamp_value = commit[1]
        if type(stamp_value) is not float:
            return _python_partition_throughput(history, commits, now, since, window)
        stamp = stamp_value
        if not stamp >= start:
            continue
        if not _read_int(commit[0], OFFSET_LIMIT, &offset) or offset < 0:
            return _python_partition_throughput(history, commits, now, since, window)
        if counted == 0:
            first_offset, first_stamp = offset, stamp
        elif busy:
            busy = _appended_before(offsets, times, size, offset, earlier_stamp)
        earlier_stamp = stamp
        before_offset, before_stamp = last_offset, last_stamp
        last_offset, last_stamp = offset, stamp
        counted += 1
    least = commits.capacity // 2
    if counted < (least if least > 2 else 2):
        return _PartitionThroughput(produced, None, False)  # positional: half the cost of keywords
    min_distance = commits.min_distance
    if min_distance > 0.0 and at - last_stamp < min_distance:  # the newest may still take merges
        last_offset, last_stamp = before_offset, before_stamp
    elapsed = last_stamp - first_stamp
    if elapsed <= 0:
        return _PartitionThroughput(produced, None, busy)
    rate = <double>(last_offset - first_offset) / elapsed
    return _PartitionThroughput(produced, rate if rate > 0.0 else 0.0, busy)


def measured_lags(committed, answered, double now, double stale_after):
    """The twin of kagent.core.time_lag.measured_lags."""
    cdef list offset_lags = []
    cdef list time_lags = []
    cdef long long log_start, log_end, at
    cdef double polled_at
    for position, answer in zip(committed, answered, strict=True):
        if answer is None:
            offset_lags.append(None)
            time_lags.append(None)
            continue
        log_start, log_end, polled_at, history = <tuple>answer
        if now - polled_at > stale_after or (position is None and log_end > log_start):
            offset_lags.append(None)
            time_lags.append(None)
        elif position is None or position >= log_end:
            offset_lags.append(0)
            time_lags.append(0.0)
        else:
            at = position
            offset_lags.append(log_end - at)
            time_lags.append(None if history is None else _time_lag(history, at, now))
    return offset_lags, time_lags


cdef extern from "Python.h":
    ctypedef struct PyObject
    char *PyOS_double_to_string(double value, char format_code, int precision, int flags, int *type) except NULL
    int Py_DTSF_ADD_DOT_0
    void PyMem_Free(void *pointer)
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL
    PyObject *PyBytes_FromStringAndSize(const char *text, Py_ssize_t size) except NULL
    char *PyBytes_AS_STRING(PyObject *text)
    int _PyBytes_Resize(PyObject **text, Py_ssize_t size) except -1
    void Py_DecRef(PyObject *text)



cdef struct Piece:
    PyObject *bytes  # owned here until it is handed back, its size cut to what was written
    char *end


cdef inline void _put(Piece *piece, const char *text, Py_ssize_t size) noexcept:
    memcpy(piece.end, text, size)
    piece.end += size


cdef inline void _put_int(Piece *piece, long long number) noexcept:
    """number's decimal digits (0 <= number)."""
    cdef char digits[24]
    cdef int length = 0
    while True:
        digits[length] = <char>(48 + number % 10)
        length += 1
        number //= 10
        if number == 0:
            break
    while length:
        length -= 1
        piece.end[0] = digits[length]
        piece.end += 1


cdef void _put_count(Piece *piece, object value) except *:
    """go_int(value) and "\n": an integer figure (an offset, a lag), from its digits below 1,000,000."""
    if 0 <= value < 1_000_000:
        _put_int(piece, value)
        _put(piece, ".0\n", 3)
    else:
        _put_text(piece, go_int(value))
        _put(piece, "\n", 1)


cdef void _put_milliseconds(Piece *piece, long long ms) noexcept:
    """repr(ms / 1000), as orjson writes it too, for |ms| < 10**15: the decimal ms / 1000, its trailing zeros
    cut but one (a decimal of at most 15 significant digits is the shortest text that reads back as its
    nearest double)."""
    cdef long long fraction
    if ms < 0:
        piece.end[0] = b'-'
        piece.end += 1
        ms = -ms
    _put_int(piece, ms // 1000)
    piece.end[0] = b'.'
    piece.end += 1
    fraction = ms % 1000
    if fraction == 0:
        piece.end[0] = b'0'
        piece.end += 1
        return
    piece.end[0] = <char>(48 + fraction // 100)
    piece.end += 1
    fraction %= 100
    if fraction:
        piece.end[0] = <char>(48 + fraction // 10)
        piece.end += 1
        fraction %= 10
        if fraction:
            piece.end[0] = <char>(48 + fraction)
            piece.end += 1


cdef void _put_seconds(Piece *piece, double seconds) except *:
    """repr(seconds) and "\n", for 0 <= seconds < 1e6 (or any double: repr's own way).

    A time lag in whole milliseconds (kagent.core.time_lag.time_lag) is written from its milliseconds
    (_put_milliseconds).
    """
    cdef long long ms = <long long>floor(seconds * 1000 + 0.5)
    cdef char *text
    if 0 <= ms < 1_000_000_000 and ms / 1000.0 == seconds:
        _put_milliseconds(piece, ms)
        _put(piece, "\n", 1)
        return
    text = PyOS_double_to_string(seconds, b'r', 0, Py_DTSF_ADD_DOT_0, NULL)
    _put(piece, text, len(text))
    PyMem_Free(text)
    _put(piece, "\n", 1)


cdef inline void _put_text(Piece *piece, str text) except *:
    cdef Py_ssize_t size
    cdef const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size)
    _put(piece, utf8, size)


cdef void _open(Piece *piece, Py_ssize_t capacity) except *:
    piece.bytes = PyBytes_FromStringAndSize(NULL, capacity)
    piece.end = PyBytes_AS_STRING(piece.bytes)


cdef object _close(Piece *piece):
    """The piece's bytes, cut to what was written; the piece owns nothing after."""
    cdef PyObject *written = piece.bytes
    piece.bytes = NULL
    _PyBytes_Resize(&written, piece.end - PyBytes_AS_STRING(written))  # frees it on failure
    result = <object>written
    Py_DecRef(written)
    return result


cdef void _drop(Piece *piece) noexcept:
    if piece.bytes != NULL:
        Py_DecRef(piece.bytes)
        piece.bytes = NULL


cdef enum:
    # A line's most bytes beyond its family's name and its labels: a value (a float's repr, or go_float's
    # or go_int's text: at most 26 bytes) and "\n".
    VALUE_ROOM = 40


cdef Py_ssize_t _labels_size(labels, Py_ssize_t count) except -1:
    """The bytes of the first count of labels, in UTF-8."""
    cdef Py_ssize_t index, size, written = 0
    for index in range(count):
        PyUnicode_AsUTF8AndSize(<str>labels[index], &size)
        written += size
    return written


cdef inline void _put_start(Piece *piece, str name, const char *label, Py_ssize_t size) except *:
    """A sample's name and labels."""
    _put_text(piece, name)
    _put(piece, label, size)


cdef void _put_time(Piece *piece, object seconds) except *:
    """go_float(seconds) and "\n": a time lag."""
    if type(seconds) is float and 0 <= seconds < 1e6:
        _put_seconds(piece, seconds)
    else:
        _put_text(piece, go_float(seconds))
        _put(piece, "\n", 1)


cdef object _python_partition_pieces = None  # kagent.core.lag_series._partition_pieces: what is not written here
cdef long long PARTITION_LIMIT = 2_147_483_648  # a partition's number is an int32: from 0, below it


cdef enum:
    LABEL_ROOM = 4096  # a partition's labels' most bytes written here (a longer one's are the Python twin's)
    PARTITION_ROOM = 22  # ',partition="' and a partition's number's most digits


def partition_pieces(labels, committed, offset_lags, time_lags):
    """The twin of kagent.core.lag_series.partition_pieces: each line written straight into its piece, its
    labels from their pieces (a holder that is no member's place, a member's labels shorter than their
    closing brace and space, or a partition that is not a TopicPartition of a number from 0 to 2**31, is left
    to the Python twin)."""
    global _names
    cdef Py_ssize_t count, in_topics = 0, index, end, size, suffix_size, places
    cdef Py_ssize_t longest = 0, longest_suffix = 0
    cdef long long holder, number
    cdef str offset_name, lag_name, seconds_name
    cdef const char *suffix
    cdef const char **texts = NULL  # each member's labels in UTF-8, and their size but the closing "} "
    cdef Py_ssize_t *sizes = NULL
    cdef char label[LABEL_ROOM]
    cdef Piece offsets, lags, seconds, written  # written: the label being put together, in label
    members, holders, partitions, topics = labels
    count = len(partitions)
    for topic in topics:
        size = topic[1]
        if size < 0:
            in_topics = -1
            break
        in_topics += size
    if not count == len(holders) == in_topics == len(committed) == len(offset_lags) == len(time_lags):
        in_topics = sum([size for _, size in topics])
        raise ValueError(
            f"{count} partitions ({len(holders)} holders, {in_topics} in topics) but {len(committed)} committed "
            f"offsets and {len(offset_lags)}, {len(time_lags)} lags"
        )
    if _names is None:  # not at import: kagent.core.lag_series imports this module
        from kagent.core.lag_series import GROUP_LAG, GROUP_LAG_SECONDS, GROUP_OFFSET

        _names = (GROUP_OFFSET.name, GROUP_LAG.name, GROUP_LAG_SECONDS.name)
    offset_name, lag_name, seconds_name = _names
    places = len(members)
    for topic in topics:
        PyUnicode_AsUTF8AndSize(<str>topic[0], &size)
        longest_suffix = max(longest_suffix, size)
    offsets.bytes = lags.bytes = seconds.bytes = NULL
    texts = <const char **>PyMem_Malloc((places or 1) * sizeof(const char *))
    sizes = <Py_ssize_t *>PyMem_Malloc((places or 1) * sizeof(Py_ssize_t))
    try:
        if texts == NULL or sizes == NULL:
            raise MemoryError()
        for index in range(places):
            texts[index] = PyUnicode_AsUTF8AndSize(<str>members[index], &size)
            # Their last two characters (as a rule "} ") are left out: two bytes when both are ASCII.
            if size < 2 or <unsigned char>texts[index][size - 1] >= 128 or <unsigned char>texts[index][size - 2] >= 128:
                return _partition_pieces_in_python(labels, committed, offset_lags, time_lags)
            sizes[index] = size - 2
            longest = max(longest, sizes[index])
        if longest + PARTITION_ROOM + longest_suffix > LABEL_ROOM:  # a label this long is the Python twin's
            return _partition_pieces_in_python(labels, committed, offset_lags, time_lags)
        size = count * (longest + PARTITION_ROOM + longest_suffix)  # at least the labels' bytes
        _open(&offsets, size + count * (len(offset_name) + VALUE_ROOM))
        _open(&lags, size + count * (len(lag_name) + VALUE_ROOM))
        _open(&seconds, size + count * (len(seconds_name) + VALUE_ROOM))
        index = 0
        for topic in topics:
            suffix = PyUnicode_AsUTF8AndSize(<str>topic[0], &suffix_size)
            end = index + <Py_ssize_t>topic[1]
            while index < end:
                tp = partitions[index]
                if (
                    not _read_int(holders[index], places, &holder)
                    or holder < 0
                    or type(tp) is not _TopicPartition
                    or not _read_int(<object>PyTuple_GET_ITEM(tp, 1), PARTITION_LIMIT, &number)
                    or number < 0
                ):
                    return _partition_pieces_in_python(labels, committed, offset_lags, time_lags)
                written.end = label
                _put(&written, texts[holder], sizes[holder])
                _put(&written, ',partition="', 12)
                _put_int(&written, number)
                _put(&written, suffix, suffix_size)
                size = written.end - label
                position = committed[index]
                if position is not None:
                    _put_start(&offsets, offset_name, label, size)
                    _put_count(&offsets, position)
                _put_start(&lags, lag_name, label, size)
                _put_start(&seconds, seconds_name, label, size)
                lag = offset_lags[index]
                waiting = time_lags[index]
                index += 1
                if lag is None:
                    _put(&lags, "NaN\n", 4)
                    _put(&seconds, "NaN\n", 4)
                    continue
                _put_count(&lags, lag)
                if lag == 0:
                    _put(&seconds, "0.0\n", 4)
                elif waiting is None:
                    _put(&seconds, "NaN\n", 4)
                else:
                    _put_time(&seconds, waiting)
        return _close(&offsets), _close(&lags), _close(&seconds)
    finally:  # a piece left open by an exception, or by a hand-over to the Python
        PyMem_Free(texts)
        PyMem_Free(sizes)
        _drop(&offsets)
        _drop(&lags)
        _drop(&seconds)


cdef object _partition_pieces_in_python(labels, committed, offset_lags, time_lags):
    global _python_partition_pieces
    if _python_partition_pieces is None:
        from kagent.core.lag_series import _partition_pieces

        _python_partition_pieces = _partition_pieces
    return _python_partition_pieces(labels, committed, offset_lags, time_lags)


cdef object _python_lag_sums = None  # kagent.core.lag_series._lag_sums: what a sum past int64 falls back to


def lag_sums(offset_lags, time_lags, topics):
    """The twin of kagent.core.lag_series.lag_sums (a lag or a sum past int64 is left to the Python twin)."""
    global _python_lag_sums
    cdef Py_ssize_t count = len(offset_lags), index, start, end
    cdef long long lag, largest = 0, total = 0, in_topic
    cdef bint known = False, topic_known
    cdef double seconds, longest = 0.0
    cdef bint waited = False, caught_up = False
    cdef list topic_sums = []
    if count != len(time_lags):
        raise ValueError(f"{count} offset lags but {len(time_lags)} time lags")
    for index in range(count):
        value = offset_lags[index]
        if value is None:
            continue
        try:
            lag = value
        except OverflowError:  # past int64: the Python twin's way
            break
        if not known or lag > largest:
            largest = lag
        if __builtin_saddll_overflow(total, lag, &total):
            break
        known = True
        if lag == 0:
            caught_up = True
            continue
        waiting = time_lags[index]
        if waiting is None:
            continue
        seconds = waiting
        if not waited or seconds > longest:
            longest = seconds
        waited = True
    else:
        if caught_up and (not waited or 0.0 > longest):  # after the others, as the Python twin takes it
            longest = 0.0
        waited = waited or caught_up
        for _, start, end in topics:
            in_topic = 0
            topic_known = False
            for index in range(max(start, 0), min(end, count)):
                value = offset_lags[index]
                if value is not None:
                    lag = value  # read above: within int64
                    if __builtin_saddll_overflow(in_topic, lag, &in_topic):
                        break
                    topic_known = True
            else:
                topic_sums.append(<double>in_topic if topic_known else NAN)
                continue
            break
        else:
            return (
                largest if known else None,
                total if known else None,
                longest if waited else NAN,
                topic_sums,
            )
    if _python_lag_sums is None:
        from kagent.core.lag_series import _lag_sums

        _python_lag_sums = _lag_sums
    return _python_lag_sums(offset_lags, time_lags, topics)


cdef object _python_read_lags = None  # kagent.core.member_lag._read_lags: whatever is not read here
cdef tuple _member_names = None  # the two member families' names, from kagent.core.lag_series at the first call
cdef double EXACT = 4503599627370496.0  # 2**52: a double's whole numbers are exact below it, halves too


cdef struct RowSums:  # one row's sums, as kagent.core.member_lag._add_up keeps them
    long long records
    long long millis
    Py_ssize_t unknown
    bint seconds_unknown
    Py_ssize_t added


cdef bint _add_row_sums(RowSums *sums, Py_ssize_t rows, owners, offset_lags, time_lags) except -1:
    """_add_up of figures read here into sums; False (sums half added) for any figure, owner or sum this does
    not take: past int64, a time lag not a float or whose milliseconds are not exact, an owner not in a tuple
    or not a row, figures of other lengths."""
    cdef Py_ssize_t count = len(owners), index, at, row
    cdef long long lag, millis
    cdef double milliseconds, rounded
    cdef RowSums *total
    if not count == len(offset_lags) == len(time_lags):
        return False
    for index in range(count):
        held = owners[index]
        if type(held) is not tuple:
            return False
        value = offset_lags[index]
        waiting = time_lags[index]
        millis = 0
        if value is not None:
            try:
                lag = value
            except OverflowError:
                return False
            if lag and waiting is not None:
                if type(waiting) is not float:
                    return False
                milliseconds = <double>waiting * 1000
                if not -EXACT < milliseconds < EXACT:  # NaN too
                    return False
                rounded = round(milliseconds)  # Python's round: halves to even
                if fabs(milliseconds - rounded) == 0.5:
                    rounded = 2.0 * round(milliseconds / 2.0)
                millis = <long long>rounded
        for at in range(PyTuple_GET_SIZE(held)):
            try:
                row = <object>PyTuple_GET_ITEM(held, at)
            except OverflowError:
                return False
            if row < 0:
                row += rows
            if not 0 <= row < rows:
                return False
            total = &sums[row]
            total.added += 1
            if value is None:
                total.unknown += 1
                continue
            if __builtin_saddll_overflow(total.records, lag, &total.records):
                return False
            if lag:
                if waiting is None:
                    total.seconds_unknown = True
                elif __builtin_saddll_overflow(total.millis, millis, &total.millis):
                    return False
    return True


def read_lags(owners, offset_lags, time_lags, expected):
    """The twin of kagent.core.member_lag.read_lags (whatever _add_row_sums does not take, or a sum of
    milliseconds not exact as a double, is left to the Python twin)."""
    global _python_read_lags
    cdef Py_ssize_t rows = len(expected), row, unknown
    cdef RowSums *sums = <RowSums *>PyMem_Calloc(rows or 1, sizeof(RowSums))
    cdef list offsets = [], seconds = []
    if sums == NULL:
        raise MemoryError()
    try:
        if _add_row_sums(sums, rows, owners, offset_lags, time_lags):
            for row in range(rows):
                needed = expected[row]
                if needed is None:
                    offsets.append(None)
                    seconds.append(None)
                    continue
                try:
                    unknown = sums[row].unknown + <Py_ssize_t>needed - sums[row].added
                except OverflowError:
                    break
                if unknown:
                    offsets.append(None)
                    seconds.append(None)
                    continue
                if not -EXACT < sums[row].millis < EXACT:
                    break
                offsets.append(sums[row].records)
                seconds.append(None if sums[row].seconds_unknown else <double>sums[row].millis / 1000.0)
            else:
                return offsets, seconds
    finally:
        PyMem_Free(sums)
    if _python_read_lags is None:
        from kagent.core.member_lag import _read_lags

        _python_read_lags = _read_lags
    return _python_read_lags(owners, offset_lags, time_lags, expected)


cdef object _python_partition_rows = None  # kagent.core.member_lag._partition_rows: whatever is not read here
cdef tuple _REST = (-1,)  # the row of no member, as kagent.core.member_lag has it


def partition_rows(held, listed, counts, read):
    """The twin of kagent.core.member_lag.partition_rows (counts not in a dict, a row listed that is not one,
    or a partition that is not a TopicPartition are left to the Python twin)."""
    cdef dict owners_of = {}, holder_of = {}, counted_in
    cdef list expected, owners = []
    cdef Py_ssize_t rows = len(held), counted, unheld = 0
    if type(counts) is not dict:
        return _partition_rows_in_python(held, listed, counts, read)
    counted_in = counts
    expected = [None] * rows
    for row in listed:
        if type(row) is not int or not 0 <= row < rows:
            return _partition_rows_in_python(held, listed, counts, read)
        partitions = held[row]
        if partitions is None:
            continue
        alone = (row,)
        counted = 0
        for tp in partitions:
            if type(tp) is not _TopicPartition:
                return _partition_rows_in_python(held, listed, counts, read)
            holder_of.setdefault(tp, row)
            count = counted_in.get(<object>PyTuple_GET_ITEM(tp, 0))
            if count is None:
                counted += 1  # never added: the member's lag is unknown
            elif <object>PyTuple_GET_ITEM(tp, 1) < count:
                counted += 1
                others = owners_of.get(tp)
                owners_of[tp] = alone if others is None else others + alone
        expected[row] = counted
    for tp in read:
        found = owners_of.get(tp)
        if found is None:
            if type(tp) is not _TopicPartition:
                return _partition_rows_in_python(held, listed, counts, read)
            count = counted_in.get(<object>PyTuple_GET_ITEM(tp, 0))
            if tp in holder_of or (count is not None and <object>PyTuple_GET_ITEM(tp, 1) >= count):
                found = ()
            else:
                found = _REST
                unheld += 1
        owners.append(found)
    if unheld:
        expected.append(unheld)
    return owners, expected, [holder_of.get(tp, rows) for tp in read]


cdef object _partition_rows_in_python(held, listed, counts, read):
    global _python_partition_rows
    if _python_partition_rows is None:
        from kagent.core.member_lag import _partition_rows

        _python_partition_rows = _partition_rows
    return _python_partition_rows(held, listed, counts, read)


def member_pieces(labels, offset_lags, time_lags):
    """The twin of kagent.core.lag_series.member_pieces: each line written straight into its piece."""
    cdef Py_ssize_t count = len(labels), index, size, written = 0
    cdef str lag_name, seconds_name
    cdef const char *label
    cdef Piece lags, seconds
    if not count == len(offset_lags) == len(time_lags):
        raise ValueError(f"{count} labels but {len(offset_lags)} offset lags and {len(time_lags)} time lags")
    global _member_names
    if _member_names is None:  # not at import: kagent.core.lag_series imports this module
        from kagent.core.lag_series import MEMBER_LAG, MEMBER_LAG_SECONDS

        _member_names = (MEMBER_LAG.name, MEMBER_LAG_SECONDS.name)
    lag_name, seconds_name = _member_names
    written = _labels_size(labels, count)
    lags.bytes = seconds.bytes = NULL
    try:
        _open(&lags, written + count * (len(lag_name) + VALUE_ROOM))
        _open(&seconds, written + count * (len(seconds_name) + VALUE_ROOM))
        for index in range(count):
            label = PyUnicode_AsUTF8AndSize(<str>labels[index], &size)
            lag = offset_lags[index]
            if lag is not None:
                _put_start(&lags, lag_name, label, size)
                _put_count(&lags, lag)
            waiting = time_lags[index]
            if waiting is not None:
                _put_start(&seconds, seconds_name, label, size)
                _put_time(&seconds, waiting)
        return _close(&lags), _close(&seconds)
    finally:  # a piece left open by an exception
        _drop(&lags)
        _drop(&seconds)



cdef object _python_applied = None  # kagent.core.committed_offset._applied: any value not as it writes one
cdef object _Applied = None  # kagent.core.committed_offset.Applied
cdef object _new_tuple = tuple.__new__  # an Applied of its fields, without its Python __new__

cdef extern from "Python.h":
    void *PyMem_Malloc(size_t size)
    long long PyLong_AsLongLongAndOverflow(object value, int *overflow) noexcept
    double PyOS_string_to_double(const char *text, char **end, void *overflow) except? -1.0

cdef enum:
    SECONDS_DIGITS = 15  # a stored commit's time is kept as its text with at most this many significant digits
    NUMBER_ROOM = 24  # the most bytes an integer of at most INT_DIGITS digits, or a time in seconds, takes
    COMMIT_ROOM = 3 * NUMBER_ROOM + 8  # a commit written: "[", three numbers (or null), two commas, "]"
    SHORTEST_COMMIT = 9  # "[0,0.0,0]": the fewest bytes a stored commit takes

cdef long long INT_LIMIT = 1_000_000_000_000_000_000  # an offset, epoch or log end at or past it: the Python's way
cdef long long STAMP_LIMIT = 1_000_000_000_000_000  # a commit timestamp (ms) at or past it: the Python's way


cdef struct Given:  # one commit of those applied: offset, commit_timestamp, leader_epoch
    long long offset, stamp, epoch
    bint has_epoch


cdef struct WindowCommit:  # one commit of the window: its text in the stored value, or its fields to write
    Py_ssize_t start, end  # its text in the stored value; start < 0 once it is to be written from here
    long long offset
    double seconds  # its time (s), as the Python twin compares it (read for the newest only)
    Py_ssize_t seconds_start, seconds_end  # its time's text in the stored value; start < 0: stamp / 1000
    long long stamp
    bint has_log_end
    long long log_end


cdef bint _seconds_text(const char *text, Py_ssize_t size, Py_ssize_t *at) noexcept:
    """A float as orjson writes one, positional, of at most SECONDS_DIGITS significant digits, and 0 or at
    least 0.0001 in size: the very text orjson writes for the float it reads (a decimal of at most 15
    significant digits is the shortest text that reads back as its nearest double)."""
    cdef Py_ssize_t index = at[0], first, point, zeros = 0, digits
    index += index < size and text[index] == b'-'
    first = index
    while index < size and 48 <= text[index] <= 57:
        index += 1
    if index == first or (text[first] == b'0' and index - first > 1) or index >= size or text[index] != b'.':
        return False
    point = index
    index += 1
    while index < size and 48 <= text[index] <= 57:
        index += 1
    digits = index - point - 1  # of the fraction
    if digits == 0 or (digits > 1 and text[index - 1] == b'0'):  # none, or a trailing zero
        return False
    if digits == 1 and text[point + 1] == b'0':  # a whole number of seconds
        digits = 0
    if text[first] == b'0':  # below 1: the fraction's leading zeros are not significant
        while zeros < digits and text[point + 1 + zeros] == b'0':
            zeros += 1
        if zeros > 3:
            return False
        digits -= zeros
    else:
        digits += point - first
    if digits > SECONDS_DIGITS:
        return False
    at[0] = index
    return True


cdef bint _value_head(const char *text, Py_ssize_t size, Py_ssize_t *at, long long *offset, long long *stamp) noexcept:
    """A stored value's fields before its window, as applied() writes them, up to and with '"commits":[':
    {"offset":N,"commit_timestamp":N,"leader_epoch":N|null,"commits":[ (each N as _int_text reads it); the
    committed offset and the commit's timestamp read."""
    cdef long long epoch
    return (
        _literal(text, size, at, b'{"offset":', 10)
        and _int_text(text, size, at, offset)
        and _literal(text, size, at, b',"commit_timestamp":', 20)
        and _int_text(text, size, at, stamp)
        and _literal(text, size, at, b',"leader_epoch":', 16)
        and (_literal(text, size, at, b'null', 4) or _int_text(text, size, at, &epoch))
        and _literal(text, size, at, b',"commits":[', 12)
    )


cdef Py_ssize_t _read_window(const char *text, Py_ssize_t size, Py_ssize_t *at, WindowCommit *window) noexcept:
    """The window's commits after '"commits":[' up to its ']', each as written (_int_text, _seconds_text,
    an integer or null); how many, or -1 for text written otherwise. The newest one's time is read."""
    cdef Py_ssize_t count = 0
    cdef WindowCommit *commit
    cdef char *end
    if _literal(text, size, at, b']', 1):
        return 0
    while True:
        commit = &window[count]
        commit.start = at[0]
        if not (_literal(text, size, at, b'[', 1) and _int_text(text, size, at, &commit.offset)):
            return -1
        commit.seconds_start = at[0] + 1
        if not (_literal(text, size, at, b',', 1) and _seconds_text(text, size, at)):
            return -1
        commit.seconds_end = at[0]
        commit.has_log_end = not _literal(text, size, at, b',null', 5)
        if commit.has_log_end and not (_literal(text, size, at, b',', 1) and _int_text(text, size, at, &commit.log_end)):
            return -1
        if not _literal(text, size, at, b']', 1):
            return -1
        commit.end = at[0]
        count += 1
        if _literal(text, size, at, b']', 1):
            break
        if not _literal(text, size, at, b',', 1):
            return -1
    commit.seconds = PyOS_string_to_double(text + commit.seconds_start, &end, NULL)  # checked: cannot fail
    return count


cdef void _put_signed(Piece *piece, long long number) noexcept:
    """number's decimal text (|number| < 10**18)."""
    if number < 0:
        piece.end[0] = b'-'
        piece.end += 1
        number = -number
    _put_int(piece, number)


cdef inline bint _read_int(object value, long long limit, long long *number) noexcept:
    """Whether value is an int (not a bool) of size below limit, read into number."""
    cdef int overflow
    if type(value) is not int:
        return False
    number[0] = PyLong_AsLongLongAndOverflow(value, &overflow)  # an int: cannot fail
    return overflow == 0 and -limit < number[0] < limit


def applied(raw, commits, log_end_offset, *, capacity, min_distance):
    """The twin of kagent.core.committed_offset.applied. A stored value as that function writes one (the
    newest commit's three fields, then the window's commits, each number in orjson's text) is read here,
    its window's commits kept as their text but for one a commit replaces; any other value, and figures
    past int64's first 18 digits or timestamps past 10**15 ms, go to the Python twin."""
    global _python_applied, _Applied
    if _python_applied is None:  # not at import: kagent.core.committed_offset imports this module
        from kagent.core.committed_offset import Applied, _applied

        _python_applied, _Applied = _applied, Applied
    cdef Py_ssize_t count, index, size = 0, at = 0, stored = 0, first = 0, room
    cdef long long most, most_distance
    cdef const char *text = NULL
    cdef long long before = 0, newest_stamp = 0, log_end = 0
    cdef bint known = raw is not None, has_log_end = log_end_offset is not None, applied_any = False
    cdef Py_ssize_t stale = 0
    cdef double seconds, distance
    cdef Given *given = NULL
    cdef Given *last = NULL
    cdef WindowCommit *window = NULL
    cdef WindowCommit *newest
    cdef Piece piece
    if (
        (type(commits) is not list and type(commits) is not tuple)
        or len(commits) % 3
        or not _read_int(capacity, 1001, &most)
        or most < 1
        or (type(min_distance) is not float and not _read_int(min_distance, STAMP_LIMIT, &most_distance))
        or (has_log_end and not _read_int(log_end_offset, INT_LIMIT, &log_end))
        or (known and type(raw) is not bytes)
    ):
        return _python_applied(raw, commits, log_end_offset, capacity=capacity, min_distance=min_distance)
    distance = min_distance
    if not -1e15 < distance < 1e15:
        return _python_applied(raw, commits, log_end_offset, capacity=capacity, min_distance=min_distance)
    count = len(commits) // 3
    if known:
        text = PyBytes_AsString(raw)
        size = len(<bytes>raw)
    given = <Given *>PyMem_Malloc(count * sizeof(Given) + (size // SHORTEST_COMMIT + count + 1) * sizeof(WindowCommit))
    if given == NULL:
        raise MemoryError()
    window = <WindowCommit *>(given + count)
    piece.bytes = NULL
    try:
        for index in range(count):
            last = &given[index]
            epoch_value = commits[3 * index + 2]
            last.has_epoch = epoch_value is not None
            if not (
                _read_int(commits[3 * index], INT_LIMIT, &last.offset)
                and _read_int(commits[3 * index + 1], STAMP_LIMIT, &last.stamp)
                and (not last.has_epoch or _read_int(epoch_value, INT_LIMIT, &last.epoch))
            ):
                return _python_applied(raw, commits, log_end_offset, capacity=capacity, min_distance=min_distance)
        if known:  # {"offset":N,"commit_timestamp":N,"leader_epoch":N|null,"commits":[[N,S,N|null],...]}
            if not _value_head(text, size, &at, &before, &newest_stamp):
                return _python_applied(raw, commits, log_end_offset, capacity=capacity, min_distance=min_distance)
            stored = _read_window(text, size, &at, window)
            if stored < 0 or not (_literal(text, size, &at, b'}', 1) and at == size):
                return _python_applied(raw, commits, log_end_offset, capacity=capacity, min_distance=min_distance)
            first = stored - most if stored > most else 0
        # The window is window[first:stored]. Each commit not older than the newest so far joins it by
        # kagent.core.group_health.add_commit's rule; an older one is stale.
        for index in range(count):
            if (known or applied_any) and given[index].stamp < newest_stamp:
                stale += 1
                continue
            last = &given[index]
            newest_stamp, applied_any = last.stamp, True
            seconds = last.stamp / 1000.0  # |stamp| < 2**53: exactly Python's int / int
            newest = &window[stored - 1] if stored > first else NULL
            if newest != NULL and (
                seconds < newest.seconds or (last.offset == newest.offset and seconds == newest.seconds)
            ):
                continue  # older than the newest by its time, or the newest again
            if newest != NULL and seconds - newest.seconds < distance:
                newest.start = -1  # replaced: the commit's offset and log end at the newest's time
            else:
                newest = &window[stored]
                stored += 1
                if stored - first > most:
                    first = stored - most
                newest.start = newest.seconds_start = -1
                newest.seconds = seconds
                newest.stamp = last.stamp
            newest.offset = last.offset
            newest.has_log_end = has_log_end
            newest.log_end = log_end
        if not applied_any:
            return _new_tuple(_Applied, (None, None, stale, False))
        room = 80 + 3 * NUMBER_ROOM
        for index in range(first, stored):
            room += 1 + (window[index].end - window[index].start if window[index].start >= 0 else COMMIT_ROOM)
        _open(&piece, room)
        _put(&piece, b'{"offset":', 10)
        _put_signed(&piece, last.offset)
        _put(&piece, b',"commit_timestamp":', 20)
        _put_signed(&piece, last.stamp)
        _put(&piece, b',"leader_epoch":', 16)
        if last.has_epoch:
            _put_signed(&piece, last.epoch)
        else:
            _put(&piece, b'null', 4)
        _put(&piece, b',"commits":[', 12)
        for index in range(first, stored):
            newest = &window[index]
            if index > first:
                _put(&piece, b',', 1)
            if newest.start >= 0:
                _put(&piece, text + newest.start, newest.end - newest.start)
                continue
            _put(&piece, b'[', 1)
            _put_signed(&piece, newest.offset)
            _put(&piece, b',', 1)
            if newest.seconds_start >= 0:
                _put(&piece, text + newest.seconds_start, newest.seconds_end - newest.seconds_start)
            else:
                _put_milliseconds(&piece, newest.stamp)
            if newest.has_log_end:
                _put(&piece, b',', 1)
                _put_signed(&piece, newest.log_end)
                _put(&piece, b']', 1)
            else:
                _put(&piece, b',null]', 6)
        _put(&piece, b']}', 2)
        value = _close(&piece)
        return _new_tuple(
            _Applied, (None if known and value == raw else value, last.offset, stale, not known or last.offset != before)
        )
    finally:
        PyMem_Free(given)
        _drop(&piece)


# -- the API's merge of pages (kagent.core.group_listing._merged_body) --------------------------------------

from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_CheckExact
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport Py_GT, Py_LT, PyObject_RichCompareBool
from cpython.unicode cimport PyUnicode_Compare


cdef extern from "Python.h":
    Py_ssize_t PyBytes_GET_SIZE(object text)
    int PySequence_Contains(object container, object value) except -1


cdef enum:
    NAME_FIELD = 0  # kagent.core.group_listing.ListedGroup.group
    JSON_FIELD = 8  # kagent.core.group_listing.ListedGroup.json, its last
    LISTED_FIELDS = 9


cdef struct Run:
    PyObject *groups  # own: the ListedGroups; another's: its listing's names
    PyObject *figures  # another's listing's figures (NULL when sorted by name, or for own)
    PyObject *body  # another's listing's body (NULL for own)
    PyObject *bounds  # another's listing's bounds (NULL for own)
    PyObject *skipped  # the set of its superseded places, or NULL
    Py_ssize_t size
    Py_ssize_t at  # the next place to merge


cdef inline object _own(Run *run, Py_ssize_t at):
    """Own's ListedGroup at ``at``."""
    item = <object>PyList_GET_ITEM(<object>run.groups, at)
    if not isinstance(item, tuple) or len(item) != LISTED_FIELDS:
        raise TypeError(f"this worker's page holds ListedGroups, not {type(item).__name__}")
    return item


cdef inline object _run_name(Run *run, Py_ssize_t at, bint own):
    if own:
        return <object>PyTuple_GET_ITEM(_own(run, at), NAME_FIELD)
    return <object>PyList_GET_ITEM(<object>run.groups, at)


cdef inline object _run_figure(Run *run, Py_ssize_t at, bint own, Py_ssize_t figure):
    if own:
        return <object>PyTuple_GET_ITEM(_own(run, at), figure)
    return <object>PyList_GET_ITEM(<object>run.figures, at)


cdef bint _before(Run *runs, Py_ssize_t a, Py_ssize_t b, Py_ssize_t figure, bint descending) except -1:
    """Whether the next of run ``a`` comes before the next of run ``b``: as merge_ranked's rows compare."""
    cdef double x, y
    cdef int order
    if figure >= 0:
        fa = _run_figure(&runs[a], runs[a].at, a == 0, figure)
        fb = _run_figure(&runs[b], runs[b].at, b == 0, figure)
        if PyFloat_CheckExact(fa) and PyFloat_CheckExact(fb):
            x, y = PyFloat_AS_DOUBLE(fa), PyFloat_AS_DOUBLE(fb)
            if x != y:
                return (x > y) if descending else (x < y)
        elif PyObject_RichCompareBool(fa, fb, Py_GT if descending else Py_LT):
            return True
        elif PyObject_RichCompareBool(fb, fa, Py_GT if descending else Py_LT):
            return False
        order = PyUnicode_Compare(_run_name(&runs[a], runs[a].at, a == 0), _run_name(&runs[b], runs[b].at, b == 0))
        return order < 0
    order = PyUnicode_Compare(_run_name(&runs[a], runs[a].at, a == 0), _run_name(&runs[b], runs[b].at, b == 0))
    return order > 0 if descending else order < 0


cdef inline void _pass_superseded(Run *run) except *:
    while run.at < run.size and run.skipped != NULL and PySequence_Contains(<object>run.skipped, run.at):
        run.at += 1


def merged_body(own, others, Py_ssize_t figure, bint descending, Py_ssize_t offset, limit, superseded, bytes head, bytes tail):
    """The twin of kagent.core.group_listing._merged_body: the pages merged in one pass (each is sorted),
    the chosen summaries' places noted, then copied once into the body."""
    if not isinstance(own, list):
        own = list(own)
    if figure >= JSON_FIELD:
        raise ValueError(f"a ListedGroup's figures are before its json, not at {figure}")
    cdef Py_ssize_t count = 1 + len(others), index, best, chosen = 0, wanted, seen = 0, length, size, start, begin
    cdef Py_ssize_t total_size
    cdef Run *runs = <Run *>PyMem_Malloc(count * sizeof(Run))
    cdef Py_ssize_t *picks = NULL
    cdef char *out
    cdef PyObject *raw
    if runs == NULL:
        raise MemoryError()
    keep = [own, *others]  # every object a Run points at stays alive through this list
    try:
        for index in range(count):
            page = keep[index]
            skipped = None if superseded is None else superseded[index]
            keep.append(skipped)
            runs[index].skipped = NULL if not skipped else <PyObject *>skipped
            runs[index].at = 0
            if index == 0:
                runs[index].groups, runs[index].figures = <PyObject *>page, NULL
                runs[index].body = runs[index].bounds = NULL
                runs[index].size = PyList_GET_SIZE(page)
            else:
                groups, figures, body, bounds = page.groups, page.figures, page.body, page.bounds
                if not isinstance(groups, list) or not isinstance(bounds, list) or not isinstance(body, bytes):
                    raise TypeError("a listing's groups and bounds are lists, its body bytes")
                if figure >= 0 and (not isinstance(figures, list) or len(figures) != len(groups)):
                    raise ValueError("a listing sorted by a figure has a figure per group")
                if len(bounds) != len(groups) + 1:
                    raise ValueError("a listing has a bound more than its groups")
                keep += [groups, figures, body, bounds]
                runs[index].groups, runs[index].body, runs[index].bounds = <PyObject *>groups, <PyObject *>body, <PyObject *>bounds
                runs[index].figures = <PyObject *>figures if figure >= 0 else NULL
                runs[index].size = len(groups)
            _pass_superseded(&runs[index])
        wanted = -1 if limit is None else <Py_ssize_t>limit
        total_size = 0
        for index in range(count):
            total_size += runs[index].size
        picks = <Py_ssize_t *>PyMem_Malloc((2 * total_size + 1) * sizeof(Py_ssize_t))
        if picks == NULL:
            raise MemoryError()
        size = len(head) + len(tail)
        while wanted < 0 or chosen < wanted:
            best = -1
            for index in range(count):
                if runs[index].at < runs[index].size and (best < 0 or _before(runs, index, best, figure, descending)):
                    best = index
            if best < 0:
                break
            if seen >= offset:
                picks[2 * chosen], picks[2 * chosen + 1] = best, runs[best].at
                if best == 0:
                    summary = <object>PyTuple_GET_ITEM(_own(&runs[0], runs[0].at), JSON_FIELD)
                    if type(summary) is not bytes:
                        raise TypeError(f"a ListedGroup's json is bytes, not {type(summary).__name__}")
                    length = PyBytes_GET_SIZE(summary)
                else:
                    length = (
                        <Py_ssize_t>(<object>PyList_GET_ITEM(<object>runs[best].bounds, runs[best].at + 1))
                        - <Py_ssize_t>(<object>PyList_GET_ITEM(<object>runs[best].bounds, runs[best].at))
                    )
                    if length < 0:
                        raise ValueError("a listing's bounds go back")
                size += length + (chosen > 0)
                chosen += 1
            seen += 1
            runs[best].at += 1
            _pass_superseded(&runs[best])
        raw = PyBytes_FromStringAndSize(NULL, size)
        result = <object>raw  # the new reference is the result's
        Py_DecRef(raw)
        out = PyBytes_AS_STRING(raw)
        memcpy(out, PyBytes_AS_STRING(<PyObject *>head), len(head))
        out += len(head)
        for index in range(chosen):
            if index:
                out[0] = b','
                out += 1
            best, start = picks[2 * index], picks[2 * index + 1]
            if best == 0:
                summary = <object>PyTuple_GET_ITEM(_own(&runs[0], start), JSON_FIELD)
                length = PyBytes_GET_SIZE(summary)
                memcpy(out, PyBytes_AS_STRING(<PyObject *>summary), length)
            else:
                begin = <Py_ssize_t>(<object>PyList_GET_ITEM(<object>runs[best].bounds, start))
                length = <Py_ssize_t>(<object>PyList_GET_ITEM(<object>runs[best].bounds, start + 1)) - begin
                if begin < 0 or begin + length > PyBytes_GET_SIZE(<object>runs[best].body):
                    raise ValueError("a listing's bounds are past its body")
                memcpy(out, PyBytes_AS_STRING(runs[best].body) + begin, length)
            out += length
        memcpy(out, PyBytes_AS_STRING(<PyObject *>tail), len(tail))
        return result
    finally:
        PyMem_Free(runs)
        PyMem_Free(picks)


cdef object _python_judged = None  # kagent.core.group_health._judged: whatever is not judged here
cdef object _recent_lag_zero = None  # kagent.core.group_health.recent_lag_zero: the STOP rule's last look
cdef tuple _verdicts = None  # (status, rule) of each outcome below, from kagent.core.group_health
cdef long long JUDGED_LIMIT = 1LL << 62  # an offset, log end or allowed lag judged here is of size below it

cdef enum:
    JUDGED_COMMITS = 64  # a window of more commits than this goes to the Python
    V_EMPTY = 0
    V_IDLE
    V_CAUGHT_UP
    V_ALLOWED
    V_TOO_FEW
    V_STOP
    V_REWIND
    V_NOT_FULL
    V_CAUGHT_UP_IN_WINDOW
    V_STALL
    V_GREW
    V_NEVER_FELL
    V_FELL


def judged(window, log_end_offset, now, allowed_lag, time_lag, recent_log_end_offsets, min_commits):
    """The twin of kagent.core.group_health._judged, for a window of at most 64 commits, each a tuple of an
    int offset, a float timestamp and an int log end or None, and an int capacity; a float ``now`` and
    ``time_lag`` (or None); and ints below 2**62 in size (offsets, log ends, the capacity, the allowed lag,
    min_commits).
    Anything else goes to the Python twin. The recent log ends are asked for, and read by the Python rule,
    only where the STOP rule needs them, as the Python does."""
    global _python_judged, _recent_lag_zero, _verdicts
    if _python_judged is None:  # not at import: kagent.core.group_health imports this module
        from kagent.core.group_health import PartitionStatus, _judged, _Rule, recent_lag_zero

        _python_judged, _recent_lag_zero = _judged, recent_lag_zero
        _verdicts = tuple(
            (PartitionStatus[status], _Rule[rule])
            for status, rule in (
                ("OK", "EMPTY"), ("OK", "IDLE"), ("OK", "CAUGHT_UP"), ("OK", "ALLOWED"), ("OK", "TOO_FEW"),
                ("STOP", "STOP"), ("REWIND", "REWIND"), ("OK", "NOT_FULL"), ("OK", "CAUGHT_UP_IN_WINDOW"),
                ("STALL", "STALL"), ("WARN", "GREW"), ("WARN", "NEVER_FELL"), ("OK", "FELL"),
            )
        )
    cdef long long offsets[JUDGED_COMMITS]
    cdef long long ends[JUDGED_COMMITS]
    cdef double stamps[JUDGED_COMMITS]
    cdef bint known[JUDGED_COMMITS]
    cdef long long lags[JUDGED_COMMITS]
    cdef long long log_end, allowed, least, lag, before, slots
    cdef Py_ssize_t count, index, last, rewind, measured = 0
    cdef double at, span
    cdef bint grew
    commits = window.commits
    capacity = window.capacity
    if (
        type(commits) is not tuple
        or not _read_int(capacity, JUDGED_LIMIT, &slots)
        or type(now) is not float
        or (time_lag is not None and type(time_lag) is not float)
        or not _read_int(log_end_offset, JUDGED_LIMIT, &log_end)
        or not _read_int(allowed_lag, JUDGED_LIMIT, &allowed)
        or not _read_int(min_commits, JUDGED_LIMIT, &least)
    ):
        return _python_judged(window, log_end_offset, now, allowed_lag, time_lag, recent_log_end_offsets, min_commits)
    count = PyTuple_GET_SIZE(commits)
    if count == 0:
        return _verdicts[V_EMPTY]
    if count > JUDGED_COMMITS:
        return _python_judged(window, log_end_offset, now, allowed_lag, time_lag, recent_log_end_offsets, min_commits)
    for index in range(count):
        commit = <object>PyTuple_GET_ITEM(commits, index)
        if not isinstance(commit, tuple) or PyTuple_GET_SIZE(commit) != 3:
            return _python_judged(window, log_end_offset, now, allowed_lag, time_lag, recent_log_end_offsets, min_commits)
        stamp = <object>PyTuple_GET_ITEM(commit, 1)
        end = <object>PyTuple_GET_ITEM(commit, 2)
        known[index] = end is not None
        if (
            not _read_int(<object>PyTuple_GET_ITEM(commit, 0), JUDGED_LIMIT, &offsets[index])
            or type(stamp) is not float
            or (known[index] and not _read_int(end, JUDGED_LIMIT, &ends[index]))
        ):
            return _python_judged(window, log_end_offset, now, allowed_lag, time_lag, recent_log_end_offsets, min_commits)
        stamps[index] = stamp
    last = count - 1
    lag = log_end - offsets[last]
    if lag < 0:
        lag = 0
    if lag <= allowed:
        if lag == 0:
            return _verdicts[V_IDLE if known[last] and ends[last] == log_end else V_CAUGHT_UP]
        return _verdicts[V_ALLOWED]
    if count < least:
        return _verdicts[V_TOO_FEW]
    at = now
    span = stamps[last] - stamps[0]
    if (
        at - stamps[last] > span  # offsets_stopped
        and not _recent_lag_zero(commits, recent_log_end_offsets())
        and (time_lag is None or <double>time_lag > span)
    ):
        return _verdicts[V_STOP]
    rewind = 0  # offsets_rewind_index, then rewind_recovered
    for index in range(1, count):
        if offsets[index] < offsets[index - 1]:
            rewind = index
            break
    if rewind:
        before = offsets[rewind - 1]
        for index in range(rewind, count):
            if offsets[index] >= before:
                break
        else:
            return _verdicts[V_REWIND]
    if count != slots:
        return _verdicts[V_NOT_FULL]
    for index in range(count):  # each known lag, in order
        if known[index]:
            lags[measured] = ends[index] - offsets[index] if ends[index] > offsets[index] else 0
            measured += 1
    for index in range(measured):  # lag_always_not_zero
        if lags[index] <= allowed:
            return _verdicts[V_CAUGHT_UP_IN_WINDOW]
    for index in range(1, count):  # offsets_stalled
        if offsets[index] != offsets[0]:
            break
    else:
        return _verdicts[V_STALL]
    if measured >= 2:
        grew = True
        for index in range(1, measured):  # lag_not_decreasing
            if lags[index] < lags[index - 1]:
                return _verdicts[V_FELL]
            if lags[index] == lags[index - 1]:
                grew = False
        return _verdicts[V_GREW if grew else V_NEVER_FELL]
    return _verdicts[V_FELL]


cdef object _python_window_of = None  # kagent.core.committed_offset._window_of: any value not as it writes one
cdef object _CommitObservation = None
cdef object _CommitWindow = None
cdef object _constructed = None  # kagent.core.constructed.constructed
cdef double[23] _POWERS_OF_TEN = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
    1e20, 1e21, 1e22,
]  # each exactly a double


cdef extern from "Python.h":
    ctypedef struct PyTypeObject
    PyObject *PyType_GenericAlloc(PyTypeObject *kind, Py_ssize_t items) except NULL
    PyObject *PyLong_FromLongLong(long long number) except NULL
    PyObject *PyFloat_FromDouble(double number) except NULL
    void PyTuple_SET_ITEM(PyObject *container, Py_ssize_t index, PyObject *item)  # steals item's reference
    void Py_IncRef(PyObject *item)
    PyObject *Py_None


cdef double _seconds_value(const char *text, Py_ssize_t start, Py_ssize_t end) noexcept:
    """The double of a time's text that _seconds_text took (at most 15 significant digits): its digits as a
    whole number below 10**15, divided by 10 to the number of its fraction's digits (at most 18). Both are
    doubles exactly, and IEEE division rounds correctly: the nearest double, which any exact reading gives."""
    cdef bint negative = text[start] == b'-'
    cdef long long digits = 0
    cdef Py_ssize_t index, fraction = 0
    cdef bint after_point = False
    for index in range(start + negative, end):
        if text[index] == b'.':
            after_point = True
            continue
        digits = digits * 10 + (text[index] - 48)
        fraction += after_point
    return (-<double>digits if negative else <double>digits) / _POWERS_OF_TEN[fraction]


def window_of(raw, capacity, min_distance):
    """The twin of kagent.core.committed_offset._window_of. A stored value as
    kagent.core.committed_offset.applied writes one (each number in orjson's text, each time of at most 15
    significant digits, which reads as one double whoever reads it exactly) is read here, for a ``capacity``
    of 1 to 1,000; any other value or capacity goes to the Python twin."""
    global _python_window_of, _CommitObservation, _CommitWindow, _constructed
    if _python_window_of is None:  # not at import: kagent.core.committed_offset imports this module
        from kagent.core.committed_offset import _window_of
        from kagent.core.constructed import constructed
        from kagent.core.group_health import CommitObservation, CommitWindow

        _python_window_of, _CommitObservation, _CommitWindow, _constructed = (
            _window_of, CommitObservation, CommitWindow, constructed
        )
    cdef long long most, number
    cdef Py_ssize_t size, at = 0, stored, first, index
    cdef const char *text
    cdef WindowCommit *window
    cdef WindowCommit *commit
    cdef PyObject *observation
    cdef tuple commits
    if type(raw) is not bytes or not _read_int(capacity, 1001, &most) or most < 1:
        return _python_window_of(raw, capacity, min_distance)
    text = PyBytes_AsString(raw)
    size = len(<bytes>raw)
    if not _value_head(text, size, &at, &number, &number):
        return _python_window_of(raw, capacity, min_distance)
    window = <WindowCommit *>PyMem_Malloc((size // SHORTEST_COMMIT + 1) * sizeof(WindowCommit))
    if window == NULL:
        raise MemoryError()
    try:
        stored = _read_window(text, size, &at, window)
        if stored < 0 or not (_literal(text, size, &at, b'}', 1) and at == size):
            return _python_window_of(raw, capacity, min_distance)
        first = stored - most if stored > most else 0
        commits = PyTuple_New(stored - first)
        for index in range(first, stored):
            commit = &window[index]
            # A CommitObservation of the three fields, as tuple.__new__ makes one, less its Python call.
            observation = PyType_GenericAlloc(<PyTypeObject *><PyObject *>_CommitObservation, 3)
            PyTuple_SET_ITEM(<PyObject *>commits, index - first, observation)  # the tuple's own reference now
            PyTuple_SET_ITEM(observation, 0, PyLong_FromLongLong(commit.offset))
            PyTuple_SET_ITEM(
                observation, 1, PyFloat_FromDouble(_seconds_value(text, commit.seconds_start, commit.seconds_end))
            )
            if commit.has_log_end:
                PyTuple_SET_ITEM(observation, 2, PyLong_FromLongLong(commit.log_end))
            else:
                Py_IncRef(Py_None)
                PyTuple_SET_ITEM(observation, 2, Py_None)
        return _constructed(_CommitWindow, {"capacity": capacity, "min_distance": min_distance, "commits": commits})
    finally:
        PyMem_Free(window)
