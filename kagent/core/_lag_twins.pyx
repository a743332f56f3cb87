# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of kagent.core.committed_offset.offsets_of, kagent.core.time_lag.measured_lags,
kagent.core.lag_series.lag_sums and kagent.core.lag_series.partition_pieces.

Each function returns exactly what its Python twin returns for the same arguments (kagent.core.lag_twins
states the contract; tests/unit/test_lag_twins.py checks it). Offsets are Kafka's int64 and the end-offset
history's points are read in place from its arrays (array("q") offsets, array("d") times), so the
interpolation is the Python twin's, operation for operation, in doubles.
"""

from cpython cimport array
from libc.math cimport NAN, floor
from libc.string cimport memcmp, memcpy

from kagent.core.exposition import go_float, go_int

cdef object _offset_of = None  # kagent.core.committed_offset.offset_of, at the first call
cdef tuple _names = None  # the three families' names, from kagent.core.lag_series at the first call


cdef extern from "Python.h":
    const char *PyBytes_AsString(object raw) except NULL

cdef extern from *:
    bint __builtin_saddll_overflow(long long a, long long b, long long *result) nogil


cdef enum:
    OFFSET_DIGITS = 18  # at most this many digits parsed here (below 10**18); more go to offset_of


def offsets_of(values):
    """The twin of kagent.core.committed_offset.offsets_of: a value that begins {"offset":DIGITS, is read
    here; any other goes to offset_of (the regex, or the whole value decoded)."""
    global _offset_of
    if _offset_of is None:  # not at import: kagent.core.committed_offset imports this module
        from kagent.core.committed_offset import offset_of

        _offset_of = offset_of
    cdef list offsets = []
    cdef const char *text
    cdef Py_ssize_t size, index, digits
    cdef long long number
    cdef bint negative
    for raw in values:
        if raw is None:
            offsets.append(None)
            continue
        if type(raw) is bytes:
            text = PyBytes_AsString(raw)
            size = len(<bytes>raw)
            if size > 11 and memcmp(text, b'{"offset":', 10) == 0:
                index = 10
                negative = text[index] == b'-'
                index += negative
                number = 0
                digits = 0
                while index < size and digits < OFFSET_DIGITS and 48 <= text[index] <= 57:
                    number = number * 10 + (text[index] - 48)
                    index += 1
                    digits += 1
                if digits and index < size and text[index] == b",":
                    offsets.append(-number if negative else number)
                    continue
        offsets.append(_offset_of(raw))
    return offsets


cdef object _time_lag(object history, long long position, double now):
    """kagent.core.time_lag.time_lag, for a position below the newest point or not."""
    cdef array.array offsets_array = history._offsets
    cdef array.array times_array = history._times
    cdef Py_ssize_t size = len(offsets_array)
    cdef long long *offsets = offsets_array.data.as_longlongs
    cdef double *times = times_array.data.as_doubles
    cdef Py_ssize_t low, high, middle, left, right
    cdef long long rise
    cdef double appended, waited
    if size and position >= offsets[size - 1]:
        return 0.0
    if size < 2:
        return None
    low, high = 0, size
    while low < high:  # bisect_right
        middle = (low + high) >> 1
        if position < offsets[middle]:
            high = middle
        else:
            low = middle + 1
    right = low
    if right == 0:  # older than the history: along its whole rate
        left, right = 0, size - 1
    else:
        left = right - 1
    rise = offsets[right] - offsets[left]
    if rise <= 0:
        return None
    appended = times[left] + <double>(position - offsets[left]) * (times[right] - times[left]) / <double>rise
    waited = floor((now - appended) * 1000 + 0.5) / 1000  # whole milliseconds
    return waited if waited > 0.0 else 0.0


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
    """number's decimal digits (0 <= number < 1_000_000 here)."""
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


cdef void _put_seconds(Piece *piece, double seconds) except *:
    """repr(seconds) and "\n", for 0 <= seconds < 1e6 (or any double: repr's own way).

    A time lag in whole milliseconds (kagent.core.time_lag.time_lag) is written from its milliseconds:
    repr of the double nearest ms / 1000 is that decimal, its trailing zeros cut but one (a decimal of at
    most 15 significant digits is the shortest text that reads back as its nearest double).
    """
    cdef long long ms = <long long>floor(seconds * 1000 + 0.5)
    cdef long long whole, fraction
    cdef char *text
    if 0 <= ms < 1_000_000_000 and ms / 1000.0 == seconds:
        whole = ms // 1000
        fraction = ms % 1000
        _put_int(piece, whole)
        piece.end[0] = b'.'
        piece.end += 1
        if fraction == 0:
            _put(piece, "0\n", 2)
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


def partition_pieces(labels, committed, offset_lags, time_lags):
    """The twin of kagent.core.lag_series.partition_pieces: each line written straight into its piece."""
    cdef Py_ssize_t count = len(labels), index, size, written = 0
    cdef str offset_name, lag_name, seconds_name
    cdef const char *label
    cdef Piece offsets, lags, seconds
    if not count == len(committed) == len(offset_lags) == len(time_lags):
        raise ValueError(
            f"{count} labels but {len(committed)} committed offsets and {len(offset_lags)}, {len(time_lags)} lags"
        )
    global _names
    if _names is None:  # not at import: kagent.core.lag_series imports this module
        from kagent.core.lag_series import GROUP_LAG, GROUP_LAG_SECONDS, GROUP_OFFSET

        _names = (GROUP_OFFSET.name, GROUP_LAG.name, GROUP_LAG_SECONDS.name)
    offset_name, lag_name, seconds_name = _names
    for index in range(count):
        PyUnicode_AsUTF8AndSize(<str>labels[index], &size)
        written += size
    offsets.bytes = lags.bytes = seconds.bytes = NULL
    try:
        _open(&offsets, written + count * (len(offset_name) + VALUE_ROOM))
        _open(&lags, written + count * (len(lag_name) + VALUE_ROOM))
        _open(&seconds, written + count * (len(seconds_name) + VALUE_ROOM))
        for index in range(count):
            label = PyUnicode_AsUTF8AndSize(<str>labels[index], &size)
            position = committed[index]
            if position is not None:
                _put_text(&offsets, offset_name)
                _put(&offsets, label, size)
                _put_count(&offsets, position)
            _put_text(&lags, lag_name)
            _put(&lags, label, size)
            _put_text(&seconds, seconds_name)
            _put(&seconds, label, size)
            lag = offset_lags[index]
            if lag is None:
                _put(&lags, "NaN\n", 4)
                _put(&seconds, "NaN\n", 4)
                continue
            _put_count(&lags, lag)
            waiting = time_lags[index]
            if lag == 0:
                _put(&seconds, "0.0\n", 4)
            elif waiting is None:
                _put(&seconds, "NaN\n", 4)
            elif waiting < 1e6:
                _put_seconds(&seconds, waiting)
            else:
                _put_text(&seconds, go_float(waiting))
                _put(&seconds, "\n", 1)
        return _close(&offsets), _close(&lags), _close(&seconds)
    finally:  # a piece left open by an exception
        _drop(&offsets)
        _drop(&lags)
        _drop(&seconds)


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
