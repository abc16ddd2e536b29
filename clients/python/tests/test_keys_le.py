"""Sampled keys as fixed-width bytes: the client asks for them
(SampleRequest.keys_fixed64, the stream's first message too), reads keys_le
with np.frombuffer, and gets bit for bit the keys the varint path gives; a
reply without keys_le (a daemon that predates it) still reads as before; a
keys_le of the wrong length is a clear error."""
import numpy as np
import pytest

from replayd import _wire
from replayd._proto import replayd_pb2 as pb

from test_client import cartpole, rows
from test_offline import FIELDS, sample_reply

EDGE = [0, 1, 127, 128, 2 ** 14, 2 ** 35, 2 ** 49 - 1, 2 ** 49, 2 ** 63, 2 ** 64 - 1]


def test_requests_are_protobufs():
    m = pb.SampleRequest(workload_id="w", batch_size=512, stratified=True, keys_fixed64=True)
    assert _wire.sample_request(b"w", 512, None, True, keys_fixed64=True) == \
        m.SerializeToString()
    m = pb.SampleStreamRequest(workload_id="w", batch_size=8, window=3, keys_fixed64=True)
    m.beta = 0.5
    assert _wire.sample_stream_open(b"w", 8, 0.5, False, 3, keys_fixed64=True) == \
        m.SerializeToString()


def with_keys_le(m, keys=None):
    """The same reply with its keys as keys_le."""
    k = list(m.keys) if keys is None else keys
    f = pb.SampleResponse()
    f.CopyFrom(m)
    f.ClearField("keys")
    f.keys_le = np.array(k, dtype="<u8").tobytes()
    return f


@pytest.mark.parametrize("n", [1, 6])
def test_both_paths_bit_identical(n):
    m, cols = sample_reply(n)
    rng = np.random.default_rng(n)
    for keys in (EDGE[:n], rng.integers(0, 2 ** 64 - 1, n, dtype=np.uint64, endpoint=True).tolist()):
        del m.keys[:]
        m.keys.extend(keys)
        plain = _wire.decode_sample(m.SerializeToString(), FIELDS)
        fixed = _wire.decode_sample(with_keys_le(m).SerializeToString(), FIELDS)
        assert fixed[0].dtype == plain[0].dtype == np.uint64
        assert fixed[0].tobytes() == plain[0].tobytes() == np.array(keys, np.uint64).tobytes()
        assert fixed[0].flags.writeable  # an array of its own, as decoded varints are
        for a, b in zip(plain[1:5], fixed[1:5]):
            assert np.array_equal(a, b)


def test_empty_reply_either_way():
    m = pb.SampleResponse(table_size=99)
    k, p, w, size, count, _ = _wire.decode_sample(m.SerializeToString(), FIELDS)
    assert k.size == p.size == 0 and k.dtype == np.uint64


@pytest.mark.parametrize("delta", [-8, -1, 1, 8])
def test_wrong_length_is_a_clear_error(delta):
    m, _ = sample_reply(6)
    f = with_keys_le(m)
    f.keys_le = (f.keys_le + bytes(16))[:48 + delta]
    raw = f.SerializeToString()
    with pytest.raises(_wire.WireError, match=r"keys_le has \d+ bytes; 6 sampled rows need 48"):
        _wire.decode_sample(raw, FIELDS)
    # the generated class's path (a field sent twice) checks it too
    with pytest.raises(_wire.WireError, match="keys_le has"):
        _wire.decode_sample(raw + b"\x20\x05", FIELDS)


def test_keys_and_keys_le_both_is_an_error():
    m, _ = sample_reply(6)
    f = with_keys_le(m)
    f.keys.extend(m.keys)
    with pytest.raises(_wire.WireError, match="both keys and keys_le"):
        _wire.decode_sample(f.SerializeToString(), FIELDS)
    with pytest.raises(_wire.WireError, match="both keys and keys_le"):
        _wire.decode_sample(f.SerializeToString() + b"\x20\x05", FIELDS)


# -- the daemon ----------------------------------------------------------------

def twins(client, n=3000):
    """Two workloads of one spec (one seed) fed the same rows: they sample
    the same keys."""
    ws = [client.register(cartpole(capacity=2000)) for _ in range(2)]
    for w in ws:
        for start in range(0, n, 500):
            w.insert(rows(500, start))
    return ws


def raw_sample(w, batch, **kw):
    req = _wire.sample_request(w.id_bytes, batch, None, False, **kw)
    return w._calls.call("Sample", req, token=w.token, timeout=30, parse=lambda raw: raw)


def test_daemon_sends_keys_le_and_the_same_keys(client):
    a, b = twins(client)
    for batch in (512, 1, 100):
        plain = pb.SampleResponse.FromString(raw_sample(a, batch))
        s = b.sample(batch)
        assert len(plain.keys) == batch and not plain.keys_le
        assert s.keys.tobytes() == np.array(plain.keys, np.uint64).tobytes()
        assert s.probabilities.tobytes() == np.array(plain.probabilities).tobytes()
    # what sample() asks for is keys_le
    m = pb.SampleResponse.FromString(raw_sample(b, 16, keys_fixed64=True))
    assert not m.keys and len(m.keys_le) == 16 * 8
    a.delete()
    b.delete()


def recorder(monkeypatch, name):
    """The bytes each _wire.<name> call returns, in a list."""
    seen = []
    orig = getattr(_wire, name)

    def rec(*a, **kw):
        seen.append(orig(*a, **kw))
        return seen[-1]
    monkeypatch.setattr(_wire, name, rec)
    return seen


def test_the_client_asks_for_keys_le(client, monkeypatch):
    w = client.register(cartpole(capacity=100))
    w.insert(rows(50))
    unary = recorder(monkeypatch, "sample_request")
    stream = recorder(monkeypatch, "sample_stream_open")
    w.sample(8)
    with w.sampler(8, max_batches=1) as it:
        list(it)
    assert len(unary) == 2
    with w.sampler(8, stream=True, max_batches=1) as it:
        list(it)
    assert len(stream) == 1
    del unary[2:]  # the stream's first message is built on a SampleRequest's
    assert all(pb.SampleRequest.FromString(r).keys_fixed64 for r in unary)
    assert pb.SampleStreamRequest.FromString(stream[0]).keys_fixed64
    w.delete()


def test_stream_sampler_gets_the_same_keys(client):
    a, b = twins(client)
    plain = [pb.SampleResponse.FromString(raw_sample(a, 64)) for _ in range(2)]
    with b.sampler(64, prefetch=2, stream=True, max_batches=2) as it:
        got = list(it)
    assert len(got) == 2
    for p, s in zip(plain, got):
        assert s.keys.tobytes() == np.array(p.keys, np.uint64).tobytes()
    a.delete()
    b.delete()
