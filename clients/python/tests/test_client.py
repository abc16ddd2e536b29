"""Every call of the Python client against the real replayd: the server,
workloads, rows in (batch insert, the writer's flush rules), rows out
(sample, the sampler), priorities, the hosted learner, the operator calls,
and each error path with its gRPC code and the daemon's message."""
import dataclasses
import struct
import threading
import time

import grpc
import numpy as np
import pytest

import replayd

CARTPOLE = {"obs": (np.float32, (4,)), "action": np.int32, "reward": np.float32,
            "next_obs": (np.float32, (4,)), "done": bool}


def cartpole(capacity=1000, **kw):
    return replayd.Spec(name="py-test", fields=CARTPOLE, capacity=capacity, seed=7, **kw)


def rows(n, start=0):
    i = np.arange(start, start + n)
    return {"obs": np.stack([i, i + 0.5, -i, i * 2], 1).astype(np.float32),
            "action": (i % 2).astype(np.int32), "reward": np.ones(n, np.float32),
            "next_obs": np.stack([i + 1, i, i, i], 1).astype(np.float32), "done": i % 7 == 0}


def row(i):
    return {k: v[0] for k, v in rows(1, i).items()}


def wait_for(fn, want, timeout=10.0):
    """fn() once it equals want, or its last value after timeout seconds
    (stream messages are applied by the daemon after they are sent)."""
    t0 = time.monotonic()
    while True:
        got = fn()
        if got == want or time.monotonic() - t0 > timeout:
            return got
        time.sleep(0.02)


def within(seconds, fn):
    """fn() in a thread: its result or its exception, or a failure if it has
    not returned after `seconds` (a writer that waits forever on a dead
    stream must fail the test, not hang it)."""
    out = {}

    def body():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            out["error"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"still running after {seconds} s")
    if "error" in out:
        raise out["error"]
    return out.get("value")


# -- the server ----------------------------------------------------------------

def test_server_info_and_devices(client):
    info = client.server_info()
    assert info.version and info.uptime_seconds >= 0
    assert any(d.kind == "cpu" for d in info.devices)
    devs = client.devices()
    cpu = [d for d in devs if d.kind == "cpu"][0]
    assert cpu.cores >= 1 and cpu.isa in ("avx512", "avx2", "baseline") and cpu.status
    w = client.register(cartpole())
    info = client.server_info()
    assert info.workload_count >= 1 and w.id in [x.id for x in info.workloads]
    w.delete()


# -- workloads -----------------------------------------------------------------

def test_register_describe_delete(client):
    w = client.register(cartpole(capacity=100, alpha=0.5))
    assert len(w.id) == 32 and len(w.token) == 64
    assert w.spec.fanout == 16 and w.spec.alpha == 0.5 and w.spec.beta == 0.4  # normalised
    assert w.spec.field_names == ("obs", "action", "reward", "next_obs", "done")
    d = w.describe()
    assert d.id == w.id and d.spec == w.spec and d.counters.size == 0 and d.learner is None
    # a handle from id and token reads the schema from the daemon
    h = client.workload(w.id, w.token)
    assert h.spec == w.spec
    w.delete()
    with pytest.raises(replayd.NotFound) as e:
        w.describe()
    assert e.value.code == grpc.StatusCode.NOT_FOUND and e.value.message


def test_register_from_a_dict_and_bad_specs(client):
    w = client.register({"fields": {"x": (np.uint8, (2, 2))}, "capacity": 10})
    assert w.spec.fields[0].shape == (2, 2)
    w.delete()
    with pytest.raises(replayd.InvalidArgument) as e:
        client.register(cartpole(capacity=0))
    assert "capacity" in e.value.message
    with pytest.raises(replayd.InvalidArgument) as e:
        client.register(cartpole(fanout=3))
    assert "fanout" in e.value.message
    with pytest.raises(replayd.InvalidArgument, match="learner"):
        client.register(cartpole(learner=replayd.Learner(algorithm="ppo", num_actions=2)))


def test_list_pages_through_every_workload(client):
    ws = [client.register(cartpole(capacity=10)) for _ in range(7)]
    ids = sorted(w.id for w in ws)
    every = [x.id for x in client.list()]
    assert every == sorted(every) and set(ids) <= set(every)
    assert [x.id for x in client.list(page_size=2)] == every  # 2 per call, all pages
    assert [x.id for x in client.iter_workloads(page_size=3)] == every
    for w in ws:
        client.delete(w.id)  # the admin token
    assert not set(ids) & {x.id for x in client.list()}


def test_delete_tokens(client, server):
    w = client.register(cartpole())
    other = client.register(cartpole())
    with pytest.raises(replayd.PermissionDenied):
        client.delete(w.id, token=other.token)
    with pytest.raises(replayd.Unauthenticated):
        replayd.Client(server.address).delete(w.id)  # no admin token, no workload token
    client.delete(w.id, token=w.token)
    client.delete(other.id)  # admin
    with pytest.raises(replayd.NotFound):
        client.delete(other.id)


# -- rows in -------------------------------------------------------------------

def test_insert_batch_and_priorities(client):
    w = client.register(cartpole(capacity=100))
    keys = w.insert(rows(10))
    assert keys.dtype == np.uint64 and keys.tolist() == list(range(10))
    r = w.insert_result(rows(5, 10), priorities=np.arange(5) + 1.0)
    assert r.keys.tolist() == list(range(10, 15)) and r.inserted == 5 and r.first_key == 10
    assert w.describe().counters.inserts == 15
    with pytest.raises(replayd.InvalidArgument, match="3 priorities for 5 rows"):
        w.insert(rows(5), priorities=[1, 2, 3])
    with pytest.raises(replayd.InvalidArgument) as e:  # the daemon's check
        w.insert(rows(2), priorities=[1.0, -1.0])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and e.value.message
    with pytest.raises(replayd.InvalidArgument, match="float64"):  # the client's, nothing sent
        w.insert(dict(rows(2), obs=np.zeros((2, 4))))
    assert w.describe().counters.inserts == 15
    w.delete()


ALL_DTYPES = {"f": (np.float32, (2, 3)), "i": np.int32, "l": (np.int64, (3,)),
              "u": (np.uint8, (5,)), "b": (bool, (2,)), "s": np.float32}


def test_every_dtype_and_shape_round_trips_bit_exact(client):
    n = 64
    w = client.register(replayd.Spec(fields=ALL_DTYPES, capacity=n, seed=3))
    rng = np.random.default_rng(11)
    f = rng.standard_normal((n, 2, 3)).astype(np.float32)
    special = np.array([np.nan, -0.0, np.inf, -np.inf, 1e-45, 3.4e38], np.float32)
    f[0] = special.reshape(2, 3)
    f.view(np.uint32)[1, 0, 0] = 0x7FC0BEEF  # a NaN with a payload
    data = {"f": f,
            "i": rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32),
            "l": rng.integers(-2 ** 63, 2 ** 63 - 1, (n, 3), dtype=np.int64),
            "u": rng.integers(0, 256, (n, 5), dtype=np.int64).astype(np.uint8),
            "b": rng.integers(0, 2, (n, 2)).astype(bool),
            "s": rng.standard_normal(n).astype(np.float32)}
    data["i"][:2] = [-2 ** 31, 2 ** 31 - 1]
    data["l"][0] = [-2 ** 63, 2 ** 63 - 1, 0]
    assert w.insert(data).tolist() == list(range(n))
    # Equal priorities, stratified: every item is drawn exactly once.
    s = w.sample(n, stratified=True)
    assert sorted(s.keys.tolist()) == list(range(n))
    assert s.table_size == n and np.allclose(s.probabilities, 1 / n) and s.weights.max() == 1.0
    for name, (dt, shape) in ((fl.name, (fl.dtype, fl.shape)) for fl in w.spec.fields):
        got = s.data[name]
        assert got.dtype == dt and got.shape == (n,) + shape, name
        want = data[name][s.keys.astype(np.int64)]
        assert got.tobytes() == want.tobytes(), name
    w.delete()


def test_writer_flushes_on_size(client):
    w = client.register(cartpole())
    wr = w.writer(max_rows=10, max_seconds=None, max_message_rows=10)
    for i in range(25):
        wr.append(row(i))
    assert wr.messages_sent == 2 and wr.rows_sent == 20 and wr.pending == 5
    assert wait_for(lambda: w.describe().counters.inserts, 20) == 20
    r = wr.close()
    assert r.inserted == 25 and r.first_key == 0
    assert w.describe().counters.inserts == 25
    assert wr.close() is r  # a second close: the same result
    with pytest.raises(replayd.Error, match="closed"):
        wr.append(row(0))
    # the rows are the appended ones, in order
    s = w.sample(25, stratified=True)
    assert sorted(s.keys.tolist()) == list(range(25))
    assert np.array_equal(s.data["obs"][:, 0], s.keys.astype(np.float32))
    w.delete()


def test_writer_flushes_on_time(client):
    w = client.register(cartpole())
    with w.writer(max_rows=1000, max_seconds=1.0) as wr:
        t0 = time.monotonic()
        for i in range(3):
            wr.append(row(i))
        assert wr.pending == 3 and wr.messages_sent == 0
        assert wait_for(lambda: w.describe().counters.inserts, 3, timeout=15) == 3
        assert time.monotonic() - t0 >= 0.95  # not before max_seconds
        assert wr.pending == 0 and wr.messages_sent == 1
        t1 = time.monotonic()
        wr.append(row(3))  # the clock starts again at the next row
        assert wait_for(lambda: wr.pending, 0, timeout=15) == 0
        assert time.monotonic() - t1 >= 0.95
    assert wr.close().inserted == 4
    w.delete()


def test_writer_flush_extend_and_priorities(client):
    w = client.register(cartpole(capacity=1000, alpha=1.0, epsilon=1e-9))
    with w.writer(max_rows=8, max_seconds=None, max_message_rows=8) as wr:
        wr.extend(rows(20))  # nothing buffered and >= max_rows: one message of 20
        assert wr.messages_sent == 1 and wr.pending == 0
        wr.extend(rows(3, 20))
        assert wr.pending == 3
        wr.flush()
        assert wr.messages_sent == 2 and wr.pending == 0
        wr.extend(rows(5, 23))
        wr.extend(rows(8, 28))  # fills the buffer (sent: 8 rows), 5 kept
        assert wr.messages_sent == 3 and wr.pending == 5
        # rows with priorities and rows without never share a message
        for i in range(36, 40):
            wr.append(row(i), priority=0.0)
        assert wr.messages_sent == 4 and wr.pending == 4
        wr.append(row(40))
        assert wr.messages_sent == 5 and wr.pending == 1
        wr.extend(rows(2, 41), priorities=[0.0, 0.0])
        assert wr.messages_sent == 6 and wr.pending == 2
    assert wr.close().inserted == 43
    # priority 0 (raw) is epsilon^alpha: those rows are (almost) never drawn
    drawn = set()
    for _ in range(40):
        drawn |= set(w.sample(43).keys.tolist())
    assert not {36, 37, 38, 39, 41, 42} & drawn and len(drawn) > 30
    w.delete()


def test_writer_coalesces_while_the_stream_is_behind(client):
    w = client.register(cartpole(capacity=1000))
    wr = w.writer(max_rows=8, max_seconds=None, max_message_rows=32)
    wr._cut_now = lambda: False  # as if two messages were waiting to be sent
    for i in range(4):
        wr.extend(rows(8, 8 * i))
    assert wr.messages_sent == 1 and wr.rows_sent == 32 and wr.pending == 0
    # Let gRPC's sending thread drain the queue and wait on it empty. A
    # batch of more than max_rows then coalesces (the stream is "behind"),
    # and that thread, finding nothing to send, must wake and cut it as one
    # message (CI once found it asleep until the next write).
    wait_for(lambda: wr._sender_waits, True)
    time.sleep(0.05)
    wr.extend(rows(16, 32))
    assert wait_for(lambda: wr.pending, 0) == 0
    assert wr.messages_sent == 2 and wr.rows_sent == 48
    del wr._cut_now  # the stream keeps up: a message per max_rows again
    wr.extend(rows(8, 48))
    assert wr.messages_sent == 3 and wr.pending == 0
    assert wr.close().inserted == 56
    s = w.sample(56, stratified=True)
    assert np.array_equal(s.data["obs"][:, 0], s.keys.astype(np.float32))
    with pytest.raises(replayd.InvalidArgument, match="max_message_rows"):
        w.writer(max_rows=8, max_message_rows=4)
    w.delete()


def test_writer_keeps_every_row_in_order_under_load(client):
    w = client.register(cartpole(capacity=4096))
    with w.writer(max_rows=8, max_seconds=None) as wr:
        for i in range(300):  # batches, and single rows between them
            if i % 3:
                wr.extend(rows(8, 8 * i))
            else:
                wr.append(row(8 * i))
                wr.extend(rows(7, 8 * i + 1))
    assert wr.close().inserted == 2400
    assert wr.messages_sent <= 300 and wr.rows_sent == 2400
    s = w.sample(2400, stratified=True)
    assert sorted(s.keys.tolist()) == list(range(2400))
    assert np.array_equal(s.data["obs"][:, 0], s.keys.astype(np.float32))
    assert w.spec.max_batch >= wr.max_message_rows
    w.delete()


def test_writer_refuses_bad_rows_and_buffers_nothing(client):
    w = client.register(cartpole())
    wr = w.writer(max_rows=4, max_seconds=None)
    wr.append(row(0))
    bad = [dict(row(1), extra=1), {k: v for k, v in row(1).items() if k != "done"},
           dict(row(1), obs=np.zeros(3, np.float32)), dict(row(1), obs=0.5),
           dict(row(1), action="left")]
    for b in bad:
        with pytest.raises(replayd.InvalidArgument):
            wr.append(b)
        assert wr.pending == 1
    with pytest.raises(replayd.InvalidArgument):
        wr.extend(dict(rows(2), reward=np.zeros(2, np.float64)))
    assert wr.pending == 1
    assert wr.close().inserted == 1
    w.delete()


def test_writer_reports_a_failed_stream(client):
    w = client.register(cartpole())
    wr = w.writer(max_rows=2, max_seconds=None)
    wr.extend(rows(2))
    client.delete(w.id)

    def keep_writing():
        for i in range(200):  # the stream's failure shows at a later call
            wr.extend(rows(2))
            time.sleep(0.01)
        wr.close()

    with pytest.raises(replayd.NotFound) as e:
        within(20, keep_writing)
    assert e.value.code == grpc.StatusCode.NOT_FOUND and e.value.message
    with pytest.raises(replayd.NotFound):
        within(5, lambda: wr.append(row(0)))


def test_writer_cancel_in_a_failing_with_block(client):
    w = client.register(cartpole())
    with pytest.raises(RuntimeError):
        with w.writer(max_rows=100, max_seconds=None) as wr:
            wr.extend(rows(150))  # sent
            wr.extend(rows(5))    # buffered, dropped by the cancel
            raise RuntimeError("the actor failed")
    time.sleep(0.2)
    assert w.describe().counters.inserts in (0, 150)
    with pytest.raises(replayd.Cancelled):
        wr.close()
    w.delete()


def test_writer_needs_the_token(client):
    w = client.register(cartpole())
    wr = client.workload(w.id).writer(max_rows=2, max_seconds=None)
    with pytest.raises(replayd.Unauthenticated):
        wr.extend(rows(2))
        wr.close()
    w.delete()


# -- rows out ------------------------------------------------------------------

def test_sample_and_update_priorities(client):
    w = client.register(cartpole(capacity=100))
    with pytest.raises(replayd.FailedPrecondition) as e:
        w.sample(4)  # empty table
    assert e.value.message
    w.insert(rows(50))
    s = w.sample(32, beta=0.5)
    assert len(s) == 32 and s.keys.dtype == np.uint64 and s.table_size == 50
    assert s.probabilities.dtype == np.float64 and np.allclose(s.probabilities, 1 / 50)
    assert s.weights.max() == 1.0
    assert np.array_equal(s["obs"][:, 0], s.keys.astype(np.float32))  # the inserted rows
    assert s.data["action"].dtype == np.int32 and s.data["done"].dtype == np.bool_
    with pytest.raises(ValueError):
        s.data["obs"][0, 0] = 1  # a read-only view of the reply
    # stratified sampling over equal priorities draws each item once
    st = w.sample(50, stratified=True)
    assert sorted(st.keys.tolist()) == list(range(50))
    u = w.update_priorities(s.keys, np.full(32, 2.0))
    assert u.applied + u.stale == 32 and u.stale == 0
    assert w.describe().counters.updates == 32
    with pytest.raises(replayd.InvalidArgument, match="2 priorities for 3 rows"):
        w.update_priorities([1, 2, 3], [1.0, 2.0])
    with pytest.raises(replayd.InvalidArgument):
        w.update_priorities([1, 2], [1.0, float("nan")])  # the daemon's check
    with pytest.raises(replayd.InvalidArgument, match="integers"):
        w.update_priorities([0.5], [1.0])
    with pytest.raises(replayd.InvalidArgument, match="never issued"):
        w.update_priorities([10 ** 6], [1.0])
    # keys overwritten since they were sampled are skipped and counted
    w.insert(rows(100, 50))
    assert w.update_priorities(s.keys, np.ones(32)).stale == 32
    w.delete()


def test_sampler_iterates_and_closes(client):
    w = client.register(cartpole())
    w.insert(rows(100))
    with w.sampler(16, prefetch=3, max_batches=5) as it:
        got = [len(b) for b in it]
    assert got == [16] * 5 and it.closed
    it = w.sampler(8, beta=0.3, prefetch=4)
    for i, b in enumerate(it):
        assert b.data["obs"].shape == (8, 4)
        if i == 2:
            break
    it.close()
    assert it._source.in_flight == 0  # every call in flight is done or cancelled
    with pytest.raises(StopIteration):
        next(it)
    # no call is started after close() (a cancelled call the daemon had
    # already taken may still be counted: let those land first)
    time.sleep(0.3)
    before = w.describe().counters.samples
    time.sleep(0.3)
    assert w.describe().counters.samples == before
    w.delete()


def test_sampler_error_ends_the_iteration(client):
    w = client.register(cartpole())
    w.insert(rows(10))
    it = w.sampler(4, prefetch=2)
    next(it)
    client.delete(w.id)
    with pytest.raises(replayd.NotFound):
        for _ in range(10):  # the batches already in flight may still arrive
            next(it)
    assert it.closed
    with pytest.raises(StopIteration):
        next(it)


def wait_until(pred, what, timeout=30.0):
    """Poll pred() until it holds; a generous deadline for a loaded machine."""
    t_end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < t_end, "timed out waiting for " + what
        time.sleep(0.01)


def test_stream_sampler_window_and_updates(client):
    w = client.register(cartpole())
    w.insert(rows(100))
    with w.sampler(16, beta=0.5, prefetch=4, stream=True, max_batches=6, timeout=60) as it:
        for b in it:
            assert len(b) == 16 and b.data["obs"].shape == (16, 4)
            assert abs(b.weights.max() - 1.0) < 1e-12
            # rows name their keys: obs[0] = key
            assert np.array_equal(b.data["obs"][:, 0], b.keys.astype(np.float32))
            assert it.update(b.keys, np.full(16, 2.0)) is None
    assert it.closed and it.batches == 6
    # close() half-closed: every update given reached the daemon
    wait_until(lambda: w.describe().counters.updates == 6 * 16, "the stream's updates")
    # the daemon sampled no more than the window ahead of what was taken
    assert 6 * 16 <= w.describe().counters.samples <= (6 + 4) * 16
    with pytest.raises(ValueError):
        w.sampler(4, prefetch=65, stream=True)
    w.delete()


def test_stream_sampler_errors_end_it(client):
    w = client.register(cartpole())
    w.insert(rows(10))
    it = w.sampler(4, prefetch=2, stream=True)
    b = next(it)
    it.update(b.keys[:1], [float("nan")])  # the daemon's check ends the stream
    with pytest.raises(replayd.InvalidArgument):
        for _ in range(10):
            next(it)
    assert it.closed
    with pytest.raises(replayd.InvalidArgument, match="integers"):
        w.sampler(4, stream=True).update([0.5], [1.0])  # the client's check
    it = w.sampler(4, prefetch=2, stream=True)
    next(it)
    client.delete(w.id)
    with pytest.raises(replayd.NotFound):
        for _ in range(10):
            next(it)
    assert it.closed
    with pytest.raises(StopIteration):
        next(it)


def test_stream_sampler_waits_for_the_rate_limiter(client):
    w = client.register(cartpole(rate_limiter={"min_size_to_sample": 20}))
    assert w.spec.rate_limiter["min_size_to_sample"] == 20
    got = []
    with w.sampler(8, prefetch=2, stream=True) as it:
        t = threading.Thread(target=lambda: got.append(next(it)))
        t.start()
        wait_until(lambda: w.describe().rate_limiter.blocked_samples == 1,
                   "the stream to wait in the daemon")
        assert not got
        w.insert(rows(20))
        t.join(30)
        assert len(got) == 1 and len(got[0]) == 8
    w.delete()


def test_data_calls_check_the_token(client):
    w = client.register(cartpole())
    w.insert(rows(5))
    anon = client.workload(w.id)  # no token
    wrong = client.workload(w.id, "0" * 64)
    for h, exc in ((anon, replayd.Unauthenticated), (wrong, replayd.PermissionDenied)):
        for call in (lambda: h.insert(rows(1)), lambda: h.sample(2),
                     lambda: h.update_priorities([0], [1.0]), lambda: h.get_weights(),
                     lambda: next(h.sampler(2))):
            with pytest.raises(exc) as e:
                call()
            assert e.value.message
    ghost = client.workload("f" * 32, w.token)
    with pytest.raises(replayd.NotFound):
        ghost.describe()
    assert w.describe().counters.inserts == 5
    w.delete()


# -- the hosted learner ----------------------------------------------------------

def test_train_step_and_weights(client):
    torch = None
    try:
        import torch
    except ImportError:
        pass
    w = client.register(cartpole(learner=replayd.Learner(hidden=(16, 16), batch_size=32,
                                                         num_actions=2)))
    assert w.spec.learner.lr == pytest.approx(1e-3) and w.spec.learner.min_size == 32
    g = w.get_weights()
    assert g.version == 1 and g.sizes == (4, 16, 16, 2)
    assert g.activations == ("relu", "relu", "identity")
    assert [a.shape for _, a in g.layers] == [(16, 4), (16,), (16, 16), (16,), (2, 16), (2,)]
    assert w.get_weights(have_version=1) is None  # not newer: nothing sent
    version, raw = w.get_weights_raw()
    assert version == 1 and raw[:4] == b"RDNN" and replayd.parse_weights(raw).sizes == g.sizes
    w.insert(rows(10))
    with pytest.raises(replayd.FailedPrecondition, match="min_size 32"):
        w.train_step(1)
    w.insert(rows(200, 10))
    with pytest.raises(replayd.InvalidArgument):
        w.train_step(0)
    r = w.train_step(20)
    assert r.steps_done == 20 and r.skipped_steps == 0 and r.weight_version > 1
    assert r.td_abs_max >= r.td_abs_mean > 0 and r.loss_mean >= 0
    g2 = w.get_weights(have_version=1)
    assert g2.version == r.weight_version and not np.array_equal(g2["0.weight"], g["0.weight"])
    assert w.describe().learner.steps == 20
    x = rows(5)["obs"]
    q = g2.forward(x)
    assert q.shape == (5, 2)
    if torch is not None:
        with torch.no_grad():
            assert np.allclose(g2.to_torch()(torch.from_numpy(x)).numpy(), q, atol=1e-5)
    w.delete()


def test_train_step_deadline_and_one_at_a_time(client):
    w = client.register(cartpole(learner=replayd.Learner(hidden=(256, 256), batch_size=256,
                                                         num_actions=2)))
    w.insert(rows(1000))
    err = []

    def long():
        try:
            w.train_step(60000, timeout=1.5)
        except replayd.Error as e:
            err.append(e)

    t = threading.Thread(target=long)
    t.start()
    time.sleep(0.3)
    with pytest.raises(replayd.Aborted, match="already running"):
        w.train_step(1)
    t.join()
    assert len(err) == 1 and isinstance(err[0], replayd.DeadlineExceeded)
    assert err[0].code == grpc.StatusCode.DEADLINE_EXCEEDED
    w.delete()


def test_get_weights_without_a_learner(client):
    w = client.register(cartpole())
    with pytest.raises(replayd.Error) as e:
        w.get_weights()
    assert e.value.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)
    with pytest.raises(replayd.Error):
        w.train_step(1)
    w.delete()


# -- operator calls ------------------------------------------------------------

def test_plan_and_profiles_need_the_admin_token(client, server):
    spec = cartpole(learner=replayd.Learner(hidden=(8, 8), batch_size=16, num_actions=2))
    anon = replayd.Client(server.address)
    wrong = replayd.Client(server.address, token="x" * 64)
    for c, exc in ((anon, replayd.Unauthenticated), (wrong, replayd.PermissionDenied)):
        for call in (lambda: c.plan(spec), c.profiles, c.export_profiles, c.clear_profiles,
                     lambda: c.import_profiles(b"")):
            with pytest.raises(exc):
                call()
    p = client.plan(spec)
    assert p.mapping and p.learner_device == "cpu" and p.batch == 16
    profs = client.profiles()
    assert profs and all(x.latency_s > 0 for x in profs)
    assert client.profiles(page_size=1) == profs  # one per call, all pages
    jsonl = client.export_profiles()
    assert jsonl.count(b"\n") == len(profs)
    assert client.clear_profiles() == len(profs) and client.profiles() == []
    assert client.import_profiles(jsonl) == len(profs)
    back = client.profiles()
    assert all(p.source == "imported" for p in back)
    assert [dataclasses.replace(p, source="") for p in back] == \
        [dataclasses.replace(p, source="") for p in profs]
    with pytest.raises(replayd.InvalidArgument):
        client.import_profiles(b"{not json}\n")


# -- connections -----------------------------------------------------------------

def test_unreachable_daemon_is_unavailable():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    c = replayd.Client(f"127.0.0.1:{port}", retries=2, backoff=0.05, timeout=5)
    t0 = time.monotonic()
    with pytest.raises(replayd.Unavailable) as e:
        c.server_info()
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert time.monotonic() - t0 >= 0.15  # two retries: 0.05 + 0.1 s of backoff
    with pytest.raises(replayd.Unavailable):
        c.wait_ready(timeout=0.2)


def test_tls_against_a_plaintext_daemon_fails_clearly(server):
    c = replayd.Client(server.address, tls=True, retries=0, timeout=3)
    with pytest.raises(replayd.Unavailable):
        c.server_info()


def test_insert_through_a_struct_built_row_matches(client):
    # The wire layout is the C client's: little-endian, packed per field.
    w = client.register(cartpole(capacity=10))
    w.insert(rows(1, 5))
    s = w.sample(1)
    assert s.data["obs"].tobytes() == struct.pack("<4f", 5, 5.5, -5, 10)
    assert s.data["next_obs"].tobytes() == struct.pack("<4f", 6, 5, 5, 5)
    assert s.data["action"].tobytes() == struct.pack("<i", 1)
    assert s.data["done"].tobytes() == b"\x00"
    w.delete()
