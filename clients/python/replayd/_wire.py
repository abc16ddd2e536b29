"""The hot messages' bytes, built and read without per-row Python work.

InsertRequest, SampleRequest and UpdatePrioritiesRequest are written here
straight from numpy buffers (one join of the column buffers: no protobuf
object holding a copy of each column), and InsertResponse, SampleResponse
and UpdatePrioritiesResponse are read here: packed doubles and the row
columns become numpy views of the reply's bytes (np.frombuffer, no copy),
sampled keys asked for as fixed-width bytes (SampleRequest.keys_fixed64)
are read with one np.frombuffer, and packed varint keys (from a server that
predates keys_le, and InsertResponse's) are decoded with a few vectorized
numpy passes.

The reader handles the encoding a protobuf writer produces for these
messages (the daemon's protobuf-c does): each field once, repeated scalars
packed, unknown fields skipped. Anything else that is still valid protobuf
(an unpacked repeated field, a field sent twice) is read by the generated
protobuf class instead, so a reply is never misread; bytes that are not
protobuf at all are an error.
"""
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ._proto import replayd_pb2 as pb
from .spec import Field

_U64 = np.uint64
_F8 = np.dtype("<f8")


class WireError(ValueError):
    """Bytes that are not a valid message."""


# ---------------------------------------------------------------------------
# Varints
# ---------------------------------------------------------------------------

def varint(n: int) -> bytes:
    """One unsigned varint."""
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(buf: bytes, pos: int, end: int) -> Tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


_SHIFTS = np.array([7 * j for j in range(10)], dtype=_U64)
_WEIGHTS = np.array([1 << (7 * j) for j in range(10)], dtype=_U64)
_LIMITS = [1 << (7 * j) for j in range(1, 10)]


def encode_varints(values: np.ndarray) -> bytes:
    """Packed varints of an array of non-negative integers (uint64)."""
    v = np.ascontiguousarray(values, dtype=_U64).reshape(-1)
    if v.size == 0:
        return b""
    lo, hi = int(v.min()), int(v.max())
    nb_lo = 1 + sum(lo >= t for t in _LIMITS)
    nb_hi = 1 + sum(hi >= t for t in _LIMITS)
    if nb_lo == nb_hi:  # every value has the same length: one broadcast
        L = nb_hi
        m = (v[:, None] >> _SHIFTS[None, :L]) & _U64(0x7F)
        m[:, :L - 1] |= _U64(0x80)
        return m.astype(np.uint8).tobytes()
    nbytes = np.ones(v.shape, dtype=np.intp)
    for t in _LIMITS[:nb_hi - 1]:
        nbytes += v >= _U64(t)
    ends = np.cumsum(nbytes)
    starts = ends - nbytes
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    for j in range(nb_hi):
        m = nbytes > j
        part = (v[m] >> _U64(7 * j)) & _U64(0x7F)
        cont = (nbytes[m] > j + 1).astype(_U64) << _U64(7)
        out[starts[m] + j] = (part | cont).astype(np.uint8)
    return out.tobytes()


def decode_varints(buf: bytes, start: int, end: int) -> np.ndarray:
    """The packed varints in buf[start:end] as uint64 (vectorized)."""
    if end == start:
        return np.zeros(0, dtype=_U64)
    if buf[end - 1] >= 0x80:
        raise WireError("truncated packed varints")
    b = np.frombuffer(buf, dtype=np.uint8, count=end - start, offset=start)
    term = b < 0x80
    n = int(np.count_nonzero(term))
    L = b.size // n
    if L * n == b.size and L < 10:
        # n terminators, and if each row of L bytes ends with one, every
        # value is L bytes long: one multiply-add decodes them all.
        m = b.reshape(n, L)
        if L == 1 or term[L - 1::L].all():
            return (m & 0x7F).astype(_U64) @ _WEIGHTS[:L]
    last = term.nonzero()[0]
    lens = np.empty(n, dtype=np.intp)
    lens[0] = last[0] + 1
    np.subtract(last[1:], last[:-1], out=lens[1:])
    if lens.max() <= 7:
        return _short_varints(buf, start, end, last, lens)
    return _any_varints(b, last, lens)


_PAD7 = bytes(7)
# A value of k bytes read as the last k of an 8-byte little-endian window:
# shifting right by _DROP[k] bits drops the window's 8 - k bytes before it.
_DROP = np.array([0] + [8 * (8 - k) for k in range(1, 9)], dtype=_U64)
_W7 = np.array([float(1 << (7 * j)) for j in range(8)])


def _short_varints(buf: bytes, start: int, end: int, last: np.ndarray,
                   lens: np.ndarray) -> np.ndarray:
    """Varints of at most 7 bytes (values below 2^49), the i-th ending at
    start + last[i] and lens[i] bytes long. Each is read as the 8-byte
    window that ends at its last byte (one gather), its own bytes shifted
    down, and the 7-bit groups summed in float64, which holds every value
    below 2^53 exactly."""
    win = np.ndarray((end - start,), dtype="<u8", buffer=_PAD7 + buf[start:end], strides=(1,))
    x = win[last]
    x >>= _DROP[lens]
    groups = x.view(np.uint8).reshape(last.size, 8)
    groups &= 0x7F
    return (groups.astype(_F8) @ _W7).astype(np.int64).view(_U64)


def _any_varints(b: np.ndarray, last: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Varints of any length up to 10 bytes: each byte's 7 bits shifted by
    its place in its value, or-reduced per value."""
    if int(lens.max()) > 10:
        raise WireError("varint longer than 10 bytes")
    starts = last - lens + 1
    pos = np.arange(b.size, dtype=_U64) - np.repeat(starts, lens).astype(_U64)
    contrib = (b & 0x7F).astype(_U64) << (pos * _U64(7))
    return np.bitwise_or.reduceat(contrib, starts)


# ---------------------------------------------------------------------------
# A message's top-level fields
# ---------------------------------------------------------------------------

class _NotCanonical(Exception):
    """Valid protobuf, but not the one-field-once, packed encoding: let the
    generated class read it."""


def _scan(buf: bytes, start: int, end: int, want: Dict[int, int],
          repeated: int = 0) -> Dict[int, Any]:
    """Fields of buf[start:end]: number -> int (varint, fixed64 as raw int)
    or (start, end) (length-delimited); field `repeated` (if known) -> the
    list of its spans. `want` maps the field numbers this reader knows to
    their wire type; others are skipped. A known field seen twice (but
    `repeated`) or with another wire type raises _NotCanonical. Keys and
    lengths of one byte, nearly all of them, are read inline."""
    out: Dict[int, Any] = {}
    pos = start
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _read_varint(buf, pos, end)
        num, wt = key >> 3, key & 7
        if num == 0:
            raise WireError("field number 0")
        if wt == 2:
            n = buf[pos] if pos < end else 0x80
            if n < 0x80:
                pos += 1
            else:
                n, pos = _read_varint(buf, pos, end)
            if pos + n > end:
                raise WireError("truncated length-delimited field")
            val: Any = (pos, pos + n)
            pos += n
        elif wt == 0:
            val, pos = _read_varint(buf, pos, end)
        elif wt == 1:
            if pos + 8 > end:
                raise WireError("truncated fixed64")
            val = (pos, pos + 8)
            pos += 8
        elif wt == 5:
            if pos + 4 > end:
                raise WireError("truncated fixed32")
            val = (pos, pos + 4)
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wt}")
        w = want.get(num)
        if w is None:
            continue
        if w != wt:
            raise _NotCanonical()
        if num == repeated:
            out.setdefault(num, []).append(val)
        elif num in out:
            raise _NotCanonical()
        else:
            out[num] = val
    if pos != end:
        raise WireError("field runs past the message")
    return out


def _doubles(buf: bytes, span: Optional[Tuple[int, int]]) -> np.ndarray:
    if span is None:
        return np.zeros(0, dtype=_F8)
    s, e = span
    if (e - s) % 8:
        raise WireError("packed doubles not a multiple of 8 bytes")
    return np.ndarray(((e - s) // 8,), dtype=_F8, buffer=buf, offset=s)


def _uint64s(buf: bytes, span: Optional[Tuple[int, int]]) -> np.ndarray:
    if span is None:
        return np.zeros(0, dtype=_U64)
    return decode_varints(buf, span[0], span[1])


# ---------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------

def _ld(tag: int, payload_len: int) -> bytes:
    return bytes((tag,)) + varint(payload_len)


class InsertEncoder:
    """InsertRequest bytes for one workload: workload_id (1), rows (2) =
    RowBatch{count (1), columns (2)...}, priorities (3, packed double). The
    framing of a message of n rows (every length but the priorities' follows
    from n and the schema) is built once per n, so a message is one join of
    cached bytes and the column buffers."""

    def __init__(self, workload_id: bytes, fields: Sequence[Field]):
        self._id = _ld(0x0A, len(workload_id)) + workload_id
        self._row_bytes = [f.row_bytes for f in fields]
        self._frames: Dict[int, Tuple[bytes, List[bytes]]] = {}

    def _frame(self, n: int) -> Tuple[bytes, List[bytes]]:
        fr = self._frames.get(n)
        if fr is None:
            cols = [_ld(0x12, n * rb) for rb in self._row_bytes]
            count = b"\x08" + varint(n)
            rb_len = len(count) + sum(len(c) + n * rb for c, rb in zip(cols, self._row_bytes))
            fr = (self._id + _ld(0x12, rb_len) + count, cols)
            if len(self._frames) < 64:
                self._frames[n] = fr
        return fr

    def encode(self, n: int, columns: Sequence[np.ndarray],
               priorities: Optional[np.ndarray]) -> bytes:
        """The InsertRequest; `columns` as replayd.columns.pack returns them
        (C-contiguous, n rows of each field's shape)."""
        head, frames = self._frame(n)
        parts: List[object] = [head]
        for fr, c in zip(frames, columns):
            parts.append(fr)
            parts.append(c)
        if priorities is not None and priorities.size:
            parts.append(_ld(0x1A, priorities.nbytes))
            parts.append(priorities)
        return b"".join(parts)  # type: ignore[arg-type]


def sample_request(workload_id: bytes, batch_size: int, beta: Optional[float],
                   stratified: bool, keys_fixed64: bool = False) -> bytes:
    """SampleRequest bytes; keys_fixed64 (24) asks for the keys as keys_le."""
    out = _ld(0x0A, len(workload_id)) + workload_id
    if batch_size:
        out += b"\x10" + varint(batch_size)
    if beta is not None:
        out += b"\x19" + struct.pack("<d", beta)
    if stratified:
        out += b"\x20\x01"
    if keys_fixed64:
        out += b"\xc0\x01\x01"
    return out


def sample_stream_open(workload_id: bytes, batch_size: int, beta: Optional[float],
                       stratified: bool, window: int, keys_fixed64: bool = False) -> bytes:
    """SampleStreamRequest bytes that open a stream: SampleRequest's first
    four fields have the same numbers, then window (5) and keys_fixed64 (9)."""
    out = sample_request(workload_id, batch_size, beta, stratified) + b"\x28" + varint(window)
    return out + b"\x48\x01" if keys_fixed64 else out


def sample_stream_more(ack: int, keys: Optional[np.ndarray],
                       priorities: Optional[np.ndarray]) -> bytes:
    """A later SampleStreamRequest: ack (6), keys (7, packed varints) and
    priorities (8, packed doubles)."""
    out: List[bytes] = []
    if ack:
        out += [b"\x30", varint(ack)]
    if keys is not None and keys.size:
        k = encode_varints(keys)
        out += [_ld(0x3A, len(k)), k]
    if priorities is not None and priorities.size:
        p = np.ascontiguousarray(priorities, dtype=_F8)
        out += [_ld(0x42, p.nbytes), p.tobytes()]
    return b"".join(out)


def update_request(workload_id: bytes, keys: np.ndarray, priorities: np.ndarray) -> bytes:
    """UpdatePrioritiesRequest bytes: keys packed varints, priorities packed doubles."""
    out = [_ld(0x0A, len(workload_id)), workload_id]
    if keys.size:
        k = encode_varints(keys)
        out += [_ld(0x12, len(k)), k]
    if priorities.size:
        p = np.ascontiguousarray(priorities, dtype=_F8)
        out += [_ld(0x1A, p.nbytes), p.tobytes()]
    return b"".join(out)


# ---------------------------------------------------------------------------
# Replies
# ---------------------------------------------------------------------------

def columns_from(buf: bytes, spans: Sequence[Tuple[int, int]], count: int,
                 fields: Sequence[Field]) -> Dict[str, np.ndarray]:
    """Each column as a read-only numpy view of buf, shape (count,) + field.shape."""
    if len(spans) != len(fields):
        raise WireError(f"the reply has {len(spans)} columns; the schema has {len(fields)}")
    out: Dict[str, np.ndarray] = {}
    for (s, e), f in zip(spans, fields):
        if e - s != count * f.row_bytes:
            raise WireError(f"column {f.name!r} has {e - s} bytes; {count} rows need "
                            f"{count * f.row_bytes}")
        out[f.name] = np.ndarray((count,) + f.shape, dtype=f.dtype, buffer=buf, offset=s)
    return out


_ROWBATCH = {1: 0, 2: 2}


def _rowbatch_spans(buf: bytes, start: int, end: int) -> Tuple[int, List[Tuple[int, int]]]:
    """(count, column spans) of a RowBatch in buf[start:end]."""
    f = _scan(buf, start, end, _ROWBATCH, repeated=2)
    return f.get(1, 0), f.get(2, [])


_SAMPLE_RESPONSE = {1: 2, 2: 2, 3: 2, 4: 0, 5: 2, 6: 2}


def keys_le(buf: bytes, start: int, end: int, n: int) -> np.ndarray:
    """SampleResponse.keys_le in buf[start:end], n keys of 8 little-endian
    bytes each, as a uint64 array of its own (as decoded varints are)."""
    if end - start != 8 * n:
        raise WireError(f"keys_le has {end - start} bytes; {n} sampled rows need {8 * n}")
    return np.frombuffer(buf, dtype="<u8", count=n, offset=start).astype(_U64)


def decode_sample(buf: bytes, fields: Sequence[Field]):
    """(keys u64, probabilities f8, weights f8, table_size, count, columns)
    of a SampleResponse; the keys from keys_le where the reply has them."""
    try:
        f = _scan(buf, 0, len(buf), _SAMPLE_RESPONSE)
        probs = _doubles(buf, f.get(2))  # type: ignore[arg-type]
        if 6 in f:
            if 1 in f:
                raise WireError("the reply has both keys and keys_le")
            s6, e6 = f[6]  # type: ignore[misc]
            keys = keys_le(buf, s6, e6, probs.size)
        else:
            keys = _uint64s(buf, f.get(1))  # type: ignore[arg-type]
        weights = _doubles(buf, f.get(3))  # type: ignore[arg-type]
        table_size = int(f.get(4, 0))  # type: ignore[arg-type]
        if 5 in f:
            s, e = f[5]  # type: ignore[misc]
            count, spans = _rowbatch_spans(buf, s, e)
        else:
            count, spans = 0, []
    except _NotCanonical:
        return _decode_sample_pb(buf, fields)
    if not (keys.size == probs.size == weights.size):
        raise WireError("keys, probabilities and weights differ in length")
    if count != keys.size and spans:
        raise WireError(f"{keys.size} keys but {count} rows")
    cols = columns_from(buf, spans, count, fields) if spans else {}
    return keys, probs, weights, table_size, count, cols


def _decode_sample_pb(buf: bytes, fields: Sequence[Field]):
    m = pb.SampleResponse.FromString(buf)
    probs = np.array(m.probabilities, dtype=_F8)
    if m.keys_le:
        if len(m.keys):
            raise WireError("the reply has both keys and keys_le")
        keys = keys_le(m.keys_le, 0, len(m.keys_le), probs.size)
    else:
        keys = np.array(m.keys, dtype=_U64)
    weights = np.array(m.weights, dtype=_F8)
    cols_bytes = list(m.rows.columns)
    joined = b"".join(cols_bytes)
    spans, pos = [], 0
    for c in cols_bytes:
        spans.append((pos, pos + len(c)))
        pos += len(c)
    cols = columns_from(joined, spans, m.rows.count, fields) if cols_bytes else {}
    return keys, probs, weights, int(m.table_size), int(m.rows.count), cols


def decode_insert(buf: bytes) -> Tuple[np.ndarray, int, int]:
    """(keys u64, inserted, first_key) of an InsertResponse."""
    try:
        f = _scan(buf, 0, len(buf), {1: 2, 2: 0, 3: 0})
        keys = _uint64s(buf, f.get(1))  # type: ignore[arg-type]
        return keys, int(f.get(2, 0)), int(f.get(3, 0))  # type: ignore[arg-type]
    except _NotCanonical:
        m = pb.InsertResponse.FromString(buf)
        return np.array(m.keys, dtype=_U64), int(m.inserted), int(m.first_key)


def decode_update(buf: bytes) -> Tuple[int, int]:
    """(applied, stale) of an UpdatePrioritiesResponse."""
    try:
        f = _scan(buf, 0, len(buf), {1: 0, 2: 0})
        return int(f.get(1, 0)), int(f.get(2, 0))  # type: ignore[arg-type]
    except _NotCanonical:
        m = pb.UpdatePrioritiesResponse.FromString(buf)
        return int(m.applied), int(m.stale)
