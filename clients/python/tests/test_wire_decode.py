"""The reply reader's fast paths (replayd/_wire.py) against the generated
protobuf class, bit-exact: packed varints of every length mix (the uniform
path, the short-varint window path up to 7 bytes, the general path for 8-10
bytes), and SampleResponse columns read in place."""
import numpy as np
import pytest

from replayd import _wire, columns
from replayd._proto import replayd_pb2 as pb

from test_offline import FIELDS, batch


def packed(values):
    """The body of a packed uint64 field, as protobuf writes it, in a buffer
    with bytes on both sides (the reader must stay inside its span)."""
    ref = pb.UpdatePrioritiesRequest(keys=[int(v) for v in values]).SerializeToString()
    m = pb.UpdatePrioritiesRequest.FromString(ref)
    assert list(m.keys) == [int(v) for v in values]
    body = ref[1 + len(_wire.varint(len(ref) - 2)):] if len(values) else b""
    return b"\xff\x01" + body, 2, 2 + len(body)


@pytest.mark.parametrize("lo,hi", [(0, 2 ** 7), (2 ** 7, 2 ** 14), (0, 2 ** 21), (2 ** 20, 2 ** 22),
                                   (2 ** 27, 2 ** 29), (0, 2 ** 49), (2 ** 42, 2 ** 49),
                                   (2 ** 48, 2 ** 50), (0, 2 ** 63), (2 ** 62, 2 ** 64 - 1)])
def test_varints_mixed_lengths(lo, hi):
    rng = np.random.default_rng(lo ^ hi)
    for n in (1, 2, 7, 512):
        v = rng.integers(lo, hi, n, dtype=np.uint64, endpoint=True)
        buf, s, e = packed(v)
        got = _wire.decode_varints(buf, s, e)
        assert got.dtype == np.uint64 and np.array_equal(got, v)


def test_varints_edges_of_each_length():
    # the largest and smallest value of every length, mixed with one-byte values
    edges = []
    for k in range(1, 11):
        edges += [(1 << (7 * k)) - 1 if k < 10 else 2 ** 64 - 1, 1 << (7 * (k - 1)) if k > 1 else 0]
    for longest in range(1, 11):
        v = np.array([x for x in edges if x < (1 << (7 * longest))] + [5, 0, 127], np.uint64)
        buf, s, e = packed(v)
        assert np.array_equal(_wire.decode_varints(buf, s, e), v), longest
        buf, s, e = packed(v[::-1])
        assert np.array_equal(_wire.decode_varints(buf, s, e), v[::-1]), longest


def test_varints_non_canonical_padding():
    # a value written longer than needed (valid protobuf): 0 in 8 bytes, 1 in 3
    body = b"\x80" * 7 + b"\x00" + b"\x81\x80\x00" + b"\x05"
    m = pb.UpdatePrioritiesRequest.FromString(b"\x12" + bytes([len(body)]) + body)
    got = _wire.decode_varints(body, 0, len(body))
    assert got.tolist() == list(m.keys) == [0, 1, 5]


def test_sample_reply_columns_in_place():
    n, cols = columns.pack(FIELDS, batch(300))
    keys = np.random.default_rng(2).integers(2 ** 20, 2 ** 22, n, dtype=np.uint64)
    m = pb.SampleResponse(keys=keys.tolist(), probabilities=np.linspace(0, 1, n).tolist(),
                          weights=np.linspace(1, 0, n).tolist(), table_size=2 ** 33,
                          rows=pb.RowBatch(count=n, columns=[c.tobytes() for c in cols]))
    raw = m.SerializeToString()
    k, p, w, size, count, data = _wire.decode_sample(raw, FIELDS)
    assert np.array_equal(k, keys) and size == 2 ** 33 and count == n
    assert p.tobytes() == np.array(m.probabilities).tobytes()
    assert w.tobytes() == np.array(m.weights).tobytes()
    for f, c in zip(FIELDS, cols):
        a = data[f.name]
        assert a.base is not None and not a.flags.writeable
        assert a.dtype == f.dtype and a.shape == (n,) + f.shape and a.tobytes() == c.tobytes()


def test_sample_reply_empty_columns_and_repeated_count():
    m = pb.SampleResponse(rows=pb.RowBatch(count=0, columns=[b""] * len(FIELDS)))
    k, p, w, size, count, data = _wire.decode_sample(m.SerializeToString(), FIELDS)
    assert k.size == p.size == w.size == count == 0
    assert all(data[f.name].shape == (0,) + f.shape for f in FIELDS)
    # a RowBatch whose count comes twice (valid: the last wins) is read by protobuf
    n, cols = columns.pack(FIELDS, batch(2))
    rb = b"\x08\x07" + pb.RowBatch(count=2, columns=[c.tobytes() for c in cols]).SerializeToString()
    raw = (pb.SampleResponse(keys=[1, 2], probabilities=[0.5, 0.5], weights=[1, 1])
           .SerializeToString() + b"\x2a" + _wire.varint(len(rb)) + rb)
    k, _, _, _, count, data = _wire.decode_sample(raw, FIELDS)
    assert k.tolist() == [1, 2] and count == 2
    assert data["obs"].tobytes() == cols[0].tobytes()


@pytest.mark.parametrize("tail", [b"\x0a", b"\x2a", b"\x2a\x80", b"\x20", b"\x0a\x05ab"])
def test_sample_reply_cut_after_a_key_is_a_wire_error(tail):
    raw = pb.SampleResponse(keys=[1], probabilities=[1.0], weights=[1.0]).SerializeToString()
    with pytest.raises(_wire.WireError):
        _wire.decode_sample(raw + tail, FIELDS)
