"""What the client does without a daemon: specs, the columns of a batch, the
hot messages' bytes against protobuf's, the RDNN parser and the torch loader."""
import math
import struct

import numpy as np
import pytest

import replayd
from replayd import _wire, columns, weights as rdnn
from replayd._proto import replayd_pb2 as pb

CARTPOLE = {"obs": (np.float32, (4,)), "action": np.int32, "reward": np.float32,
            "next_obs": (np.float32, 4), "done": bool}


# -- specs -------------------------------------------------------------------

def test_field_spellings():
    s = replayd.Spec(capacity=10, fields={
        "a": np.float32, "b": "int32", "c": ("int64", (2, 3)), "d": np.dtype((np.uint8, (5,))),
        "e": bool, "f": int, "g": float, "h": replayd.Field("ignored", "uint8", 7),
        "i": (np.float32, 4)})
    got = [(f.name, f.dtype.name, f.shape) for f in s.fields]
    assert got == [("a", "float32", ()), ("b", "int32", ()), ("c", "int64", (2, 3)),
                   ("d", "uint8", (5,)), ("e", "bool", ()), ("f", "int64", ()),
                   ("g", "float32", ()), ("h", "uint8", (7,)), ("i", "float32", (4,))]
    assert s.fields[2].row_bytes == 48 and s.fields[2].elements == 6
    assert s.row_bytes == 4 + 4 + 48 + 5 + 1 + 8 + 4 + 7 + 16


@pytest.mark.parametrize("fields,needle", [
    ({"a": np.float64}, "float64"), ({"a": "complex64"}, "complex64"), ({"a": object}, "dtype"),
    ({"a": (np.float32, (0,))}, "below 1"), ({"a": (np.float32, "x")}, "shape"),
    ({"a": (np.float32, 2, 3)}, "(dtype, shape)"), ({}, "at least one field"),
    ("obs", "mapping")])
def test_bad_fields(fields, needle):
    with pytest.raises(replayd.InvalidArgument) as e:
        replayd.Spec(capacity=10, fields=fields)
    assert needle in str(e.value)
    assert isinstance(e.value, ValueError)


def test_duplicate_fields():
    with pytest.raises(replayd.InvalidArgument, match="duplicate"):
        replayd.Spec(capacity=1, fields=[replayd.Field("a", "int32"), replayd.Field("a", "uint8")])


def test_spec_proto_round_trip():
    s = replayd.Spec(fields=CARTPOLE, capacity=123, name="x", fanout=8, alpha=0.5, beta=None,
                     seed=9, max_batch=77, learner=replayd.Learner(
                         hidden=(8, 8), num_actions=2, lr=1e-4, double_dqn=False,
                         samples_per_insert=4.0))
    m = s.to_proto()
    assert m.HasField("alpha") and not m.HasField("beta") and not m.HasField("epsilon")
    assert m.learner.HasField("lr") and not m.learner.HasField("gamma")
    assert m.learner.HasField("double_dqn") and m.learner.double_dqn is False
    assert [f.dtype for f in m.fields] == [pb.FLOAT32, pb.INT32, pb.FLOAT32, pb.FLOAT32, pb.BOOL]
    assert list(m.fields[0].shape) == [4] and list(m.fields[1].shape) == []
    back = replayd.Spec.from_proto(m)
    assert back == s


# -- columns -------------------------------------------------------------------

def batch(n=8, **over):
    i = np.arange(n)
    b = {"obs": np.stack([i, i + 1, i + 2, i + 3], 1).astype(np.float32),
         "action": (i % 2).astype(np.int32), "reward": np.ones(n, np.float32),
         "next_obs": np.zeros((n, 4), np.float32), "done": i % 3 == 0}
    b.update(over)
    return b


FIELDS = replayd.Spec(fields=CARTPOLE, capacity=10).fields


def test_pack_ok_and_conversions():
    n, cols = columns.pack(FIELDS, batch())
    assert n == 8 and [c.dtype.name for c in cols] == ["float32", "int32", "float32", "float32",
                                                        "bool"]
    assert all(c.flags.c_contiguous for c in cols)
    # safe casts, lists, and strided arrays are taken (the last copied once)
    big = np.zeros((8, 8), np.float32)
    n, cols = columns.pack(FIELDS, batch(action=np.arange(8, dtype=np.int16),
                                         reward=[1.0] * 8, next_obs=big[:, ::2]))
    assert cols[1].dtype == np.int32 and cols[3].flags.c_contiguous
    # bool bytes other than 0/1 (a view of other data) become 0/1
    raw = np.array([0, 1, 2, 255, 0, 0, 7, 1], np.uint8).view(np.bool_)
    n, cols = columns.pack(FIELDS, batch(done=raw))
    assert cols[4].view(np.uint8).tolist() == [0, 1, 1, 1, 0, 0, 1, 1]
    # big-endian input is made little-endian
    n, cols = columns.pack(FIELDS, batch(reward=np.arange(8, dtype=">f4")))
    assert cols[2].dtype.byteorder in "<=" and cols[2].tolist() == list(range(8))


@pytest.mark.parametrize("over,needle", [
    (dict(obs=np.zeros((8, 4))), "float64"),
    (dict(action=np.zeros(8, np.int64)), "int64"),
    (dict(done=np.zeros(8, np.uint8)), "bool"),
    (dict(obs=np.zeros((8, 3), np.float32)), "(n, 4)"),
    (dict(reward=np.zeros((8, 1), np.float32)), "(n,)"),
    (dict(action=np.zeros(7, np.int32)), "7 rows"),
    (dict(extra=np.zeros(8)), "unknown field"),
    (dict(action="abc"), "action"),
])
def test_pack_refuses(over, needle):
    with pytest.raises(replayd.InvalidArgument) as e:
        columns.pack(FIELDS, batch(**over))
    assert needle in str(e.value)


def test_pack_missing_and_empty():
    b = batch()
    del b["reward"]
    with pytest.raises(replayd.InvalidArgument, match="'reward' is missing"):
        columns.pack(FIELDS, b)
    with pytest.raises(replayd.InvalidArgument, match="at least one row"):
        columns.pack(FIELDS, batch(0))
    with pytest.raises(replayd.InvalidArgument, match="dict of arrays"):
        columns.pack(FIELDS, [1, 2])


# -- the wire ----------------------------------------------------------------

def test_varints_against_protobuf():
    rng = np.random.default_rng(5)
    cases = [np.arange(0, 600, dtype=np.uint64), np.array([0, 127, 128, 16383, 16384], np.uint64),
             np.array([2 ** 64 - 1, 2 ** 63, 1, 0], np.uint64),
             rng.integers(0, 2 ** 63, 333, dtype=np.uint64),
             rng.integers(2 ** 21, 2 ** 28, 512, dtype=np.uint64), np.zeros(0, np.uint64)]
    for k in range(64):
        cases.append((np.uint64(1) << np.uint64(k)) - rng.integers(0, 2, 40, dtype=np.uint64))
    for v in cases:
        ref = pb.UpdatePrioritiesRequest(keys=v.tolist()).SerializeToString()
        body = ref[1 + len(_wire.varint(len(ref) - 1 - 1)):] if v.size else b""
        enc = _wire.encode_varints(v)
        assert enc == body[len(body) - len(enc):] and len(enc) == len(body)
        buf = b"\xff" + enc + b"\x80"
        assert np.array_equal(_wire.decode_varints(buf, 1, 1 + len(enc)), v)


def test_varints_malformed():
    with pytest.raises(_wire.WireError):
        _wire.decode_varints(b"\x01\x80", 0, 2)
    with pytest.raises(_wire.WireError):
        _wire.decode_varints(b"\x80" * 11 + b"\x01", 0, 12)


def test_insert_request_is_protobufs():
    enc = _wire.InsertEncoder(b"wid", FIELDS)
    for n in (5, 1, 300, 5):  # the second 5 reuses the cached framing
        n, cols = columns.pack(FIELDS, batch(n))
        for prio in (None, np.arange(n) / 4.0):
            raw = enc.encode(n, cols, prio)
            m = pb.InsertRequest.FromString(raw)
            assert m.workload_id == "wid" and m.rows.count == n
            assert [bytes(c) for c in m.rows.columns] == [c.tobytes() for c in cols]
            assert list(m.priorities) == ([] if prio is None else prio.tolist())
            ref = pb.InsertRequest(workload_id="wid", rows=pb.RowBatch(
                count=n, columns=[c.tobytes() for c in cols]),
                priorities=[] if prio is None else prio.tolist()).SerializeToString()
            assert raw == ref


def test_sample_and_update_requests_are_protobufs():
    for beta, strat, b in ((None, False, 64), (0.0, True, 1), (0.7, False, 0)):
        m = pb.SampleRequest(workload_id="w", batch_size=b, stratified=strat)
        if beta is not None:
            m.beta = beta
        assert _wire.sample_request(b"w", b, beta, strat) == m.SerializeToString()
    keys = np.array([0, 1, 300, 2 ** 40], np.uint64)
    pr = np.array([0.0, 1.5, 2.0, 1e-9])
    assert _wire.update_request(b"w", keys, pr) == pb.UpdatePrioritiesRequest(
        workload_id="w", keys=keys.tolist(), priorities=pr.tolist()).SerializeToString()


def sample_reply(n=6):
    n_, cols = columns.pack(FIELDS, batch(n))
    return pb.SampleResponse(
        keys=[3, 200, 70000, 5, 2 ** 40, 1][:n], probabilities=[0.1 * i for i in range(n)],
        weights=[1.0 / (i + 1) for i in range(n)], table_size=99,
        rows=pb.RowBatch(count=n, columns=[c.tobytes() for c in cols])), cols


def check_sample(got, m, cols):
    keys, probs, w, size, count, data = got
    assert keys.tolist() == list(m.keys) and keys.dtype == np.uint64
    assert probs.tolist() == list(m.probabilities) and w.tolist() == list(m.weights)
    assert size == 99 and count == len(m.keys)
    for f, c in zip(FIELDS, cols):
        assert data[f.name].dtype == f.dtype and data[f.name].shape == (count,) + f.shape
        assert data[f.name].tobytes() == c.tobytes()
        assert not data[f.name].flags.writeable  # a view of the reply


def test_decode_sample_canonical():
    m, cols = sample_reply()
    check_sample(_wire.decode_sample(m.SerializeToString(), FIELDS), m, cols)


def test_decode_sample_other_encodings():
    m, cols = sample_reply()
    raw = m.SerializeToString()
    # unknown fields (a newer daemon) are skipped, in the reply and in its RowBatch
    extra = (b"\xa0\x06\x05" + b"\xaa\x06\x03abc" + b"\xa9\x06" + b"\x00" * 8
             + b"\xad\x06\x00\x00\x00\x00")  # fields 100-101: varint, bytes, fixed64, fixed32
    check_sample(_wire.decode_sample(extra + raw + extra, FIELDS), m, cols)
    rb = m.rows.SerializeToString()
    raw2 = pb.SampleResponse(keys=m.keys, probabilities=m.probabilities, weights=m.weights,
                             table_size=99).SerializeToString()
    rows_extra = b"\x18\x07" + rb
    raw2 += b"\x2a" + _wire.varint(len(rows_extra)) + rows_extra
    check_sample(_wire.decode_sample(raw2, FIELDS), m, cols)
    # unpacked keys (valid protobuf, not what protobuf writes): read by protobuf
    unpacked = b"".join(b"\x08" + _wire.varint(k) for k in m.keys)
    rest = pb.SampleResponse(probabilities=m.probabilities, weights=m.weights, table_size=99,
                             rows=m.rows).SerializeToString()
    check_sample(_wire.decode_sample(unpacked + rest, FIELDS), m, cols)
    # keys split over two packed runs: also valid, also read by protobuf
    k1 = _wire.encode_varints(np.array(m.keys[:2], np.uint64))
    k2 = _wire.encode_varints(np.array(m.keys[2:], np.uint64))
    split = (b"\x0a" + _wire.varint(len(k1)) + k1 + b"\x0a" + _wire.varint(len(k2)) + k2 + rest)
    check_sample(_wire.decode_sample(split, FIELDS), m, cols)


@pytest.mark.parametrize("cut", [1, 5, 20, -1, -3])
def test_decode_sample_truncated(cut):
    m, _ = sample_reply()
    raw = m.SerializeToString()
    with pytest.raises(Exception):
        _wire.decode_sample(raw[:cut], FIELDS)


def test_decode_sample_wrong_schema():
    m, _ = sample_reply()
    with pytest.raises(_wire.WireError, match="columns"):
        _wire.decode_sample(m.SerializeToString(), FIELDS[:4])
    other = replayd.Spec(fields={"obs": (np.float32, 5), "action": np.int32, "reward": np.float32,
                                 "next_obs": (np.float32, 4), "done": bool}, capacity=1).fields
    with pytest.raises(_wire.WireError, match="'obs'"):
        _wire.decode_sample(m.SerializeToString(), other)


def test_decode_insert_and_update():
    raw = pb.InsertResponse(keys=[5, 6, 70000], inserted=3, first_key=5).SerializeToString()
    k, ins, first = _wire.decode_insert(raw)
    assert k.tolist() == [5, 6, 70000] and ins == 3 and first == 5
    assert _wire.decode_update(pb.UpdatePrioritiesResponse(applied=4, stale=2)
                               .SerializeToString()) == (4, 2)
    assert _wire.decode_update(b"") == (0, 0)


# -- RDNN --------------------------------------------------------------------

def rdnn_bytes(sizes, acts, params=None, magic=rdnn.MAGIC, version=1):
    L = len(sizes) - 1
    n = sum(sizes[l + 1] * sizes[l] + sizes[l + 1] for l in range(L))
    if params is None:
        params = np.arange(n, dtype=np.float32) / n - 0.5
    return (struct.pack("<3I", magic, version, L) + struct.pack(f"<{L + 1}I", *sizes)
            + struct.pack(f"<{L}I", *acts) + np.asarray(params, "<f4").tobytes())


def test_rdnn_parse_and_forward():
    buf = rdnn_bytes([3, 5, 2], [1, 0])
    w = rdnn.parse(buf, version=7)
    assert w.version == 7 and w.sizes == (3, 5, 2) and w.activations == ("relu", "identity")
    assert [(n, a.shape) for n, a in w.layers] == [("0.weight", (5, 3)), ("0.bias", (5,)),
                                                  ("1.weight", (2, 5)), ("1.bias", (2,))]
    flat = np.frombuffer(buf, "<f4", offset=12 + 4 * 5)
    assert np.array_equal(w["0.weight"].ravel(), flat[:15])
    assert np.array_equal(w["1.bias"], flat[-2:])
    x = np.array([[1.0, -2.0, 0.5], [0, 0, 0]], np.float32)
    h = np.maximum(x @ w["0.weight"].T + w["0.bias"], 0)
    assert np.allclose(w.forward(x), h @ w["1.weight"].T + w["1.bias"])
    t = rdnn.parse(rdnn_bytes([2, 2], [2]))
    assert np.allclose(t.forward([1.0, 2.0]), np.tanh(t["0.weight"] @ [1.0, 2.0] + t["0.bias"]))
    with pytest.raises(replayd.InvalidArgument, match="takes 3"):
        w.forward(np.zeros(4))


@pytest.mark.parametrize("buf,needle", [
    (b"RDNN", "shorter than the 12-byte header"),
    (rdnn_bytes([3, 2], [0], magic=0x12345678), "bad magic"),
    (rdnn_bytes([3, 2], [0], version=2), "unknown version"),
    (struct.pack("<3I", rdnn.MAGIC, 1, 0), "0 layers"),
    (struct.pack("<3I", rdnn.MAGIC, 1, 17), "17 layers"),
    (struct.pack("<3I", rdnn.MAGIC, 1, 2) + b"\x00" * 8, "shorter than the header"),
    (rdnn_bytes([3, 0], [0], params=[]), "size 1 is 0"),
    (rdnn_bytes([3, 70000], [0], params=[]), "size 1 is 70000"),
    (rdnn_bytes([3, 2], [3]), "activation code 3"),
    (rdnn_bytes([3, 2], [0])[:-1], "truncated"),
    (rdnn_bytes([3, 2], [0]) + b"\x00\x00\x00\x00", "trailing bytes"),
    (rdnn_bytes([3, 2], [0], params=[0.0] * 7 + [math.nan]),
     "layer 0 has a non-finite weight at index 7"),
    (rdnn_bytes([2, 2, 1], [1, 0], params=[0.0] * 7 + [math.inf, 0.0]),
     "layer 1 has a non-finite weight at index 1"),
    (struct.pack("<3I", rdnn.MAGIC, 1, 2) + struct.pack("<3I", 65536, 65536, 65536) + b"\x00" * 8,
     "parameters"),
])
def test_rdnn_malformed(buf, needle):
    with pytest.raises(replayd.InvalidArgument) as e:
        rdnn.parse(buf)
    assert needle in str(e.value)


def test_rdnn_torch():
    torch = pytest.importorskip("torch")
    w = rdnn.parse(rdnn_bytes([4, 6, 3, 2], [1, 2, 0]))
    net = w.to_torch()
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    with torch.no_grad():
        y = net(torch.from_numpy(x)).numpy()
    assert np.allclose(y, w.forward(x), atol=1e-6)
    assert [type(m).__name__ for m in net] == ["Linear", "ReLU", "Linear", "Tanh", "Linear"]
    # load_into a module of the user's, in modules() order; a mismatch copies nothing
    mine = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3),
                               torch.nn.Tanh(), torch.nn.Linear(3, 2))
    assert w.load_into(mine) is mine
    assert torch.equal(mine[2].weight, torch.from_numpy(np.array(w["1.weight"])))
    wrong = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Linear(6, 4),
                                torch.nn.Linear(4, 2))
    before = [p.clone() for p in wrong.parameters()]
    with pytest.raises(replayd.InvalidArgument, match="Linear 1"):
        w.load_into(wrong)
    assert all(torch.equal(a, b) for a, b in zip(before, wrong.parameters()))
    with pytest.raises(replayd.InvalidArgument, match="2 Linear layers"):
        w.load_into(torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Linear(6, 2)))


def test_errors_carry_code_and_message():
    import grpc
    e = replayd.errors.error_for(grpc.StatusCode.NOT_FOUND, "no workload 'x'", "Sample")
    assert isinstance(e, replayd.NotFound) and isinstance(e, replayd.Error)
    assert e.code == grpc.StatusCode.NOT_FOUND and e.message == "no workload 'x'"
    assert str(e) == "NOT_FOUND: no workload 'x' (Sample)"
    e = replayd.errors.error_for(grpc.StatusCode.DATA_LOSS, "lost")
    assert type(e) is replayd.Error and e.code == grpc.StatusCode.DATA_LOSS
    assert isinstance(replayd.DeadlineExceeded("x"), TimeoutError)
