#!/usr/bin/python3
"""Durability (issue 22) on the real daemon: checkpoints and restore, a
learner that resumes, corrupt checkpoints, journal mode under kill -9,
checkpoint mode under kill -9, export and import, and faults on a small
real filesystem (disk full, read-only, a failing journal).

usage: test_durability.py REPLAYD_EXE PROTO_DIR [REPLAYCTL_EXE]
"""
import ctypes
import os
import random
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPLAYCTL = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
if len(sys.argv) > 3:
    del sys.argv[3]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from replayd_test import Daemon, pb, TOKEN_KEY, grpc, cartpole_spec, rows  # noqa: E402

SIGKILL = signal.SIGKILL


# ---- the checkpoint format (daemon/core/ckpt_file.h, durable.h) ----------

def parse_ckpt(data):
    """A checkpoint or export file as a dict: sections by (type, aux), the
    table section's config and state, leaves, columns."""
    assert data[:8] == b"RPLYDCKP", "not a checkpoint"
    off, secs = 64, {}
    while True:
        typ, aux, flags, _, raw, stored, _, _ = struct.unpack_from("<IIIIQQQQ", data, off)
        off += 48
        if typ == 0xFFFFFFFF:
            break
        assert flags == 0, "compressed sections are not parsed here"
        secs[(typ, aux)] = data[off:off + stored]
        off += stored
    t = secs[(2, 0)]
    cap, fanout, nf, _ = struct.unpack_from("<IIII", t, 0)
    alpha, eps, maxp, scale = struct.unpack_from("<dddd", t, 16)
    p = 56
    fields = []
    for _ in range(nf):
        dtype, rank = struct.unpack_from("<II", t, p)
        shape = struct.unpack_from("<8I", t, p + 8)[:rank]
        nl = struct.unpack_from("<I", t, p + 40)[0]
        fields.append((t[p + 44:p + 44 + nl].decode(), dtype, shape))
        p += 44 + nl
    next_key, size, draws = struct.unpack_from("<QQQ", t, p)
    max_p, = struct.unpack_from("<d", t, p + 24)
    stats = struct.unpack_from("<QQQQ", t, p + 32)
    leaves = struct.unpack("<%dQ" % size, secs[(3, 0)])
    cols = [secs[(4, f)] for f in range(nf)]
    return dict(capacity=cap, scale=scale, fields=fields, next_key=next_key, size=size,
                draws=draws, max_p=max_p, inserts=stats[0], samples=stats[1],
                updates=stats[2], stale=stats[3], leaves=leaves, cols=cols,
                learner=secs.get((5, 0)))


def row_bytes(ck, key):
    """The bytes of every field of a live key, joined."""
    lo = ck["next_key"] - ck["size"]
    i = key - lo
    out = b""
    for f, col in enumerate(ck["cols"]):
        fb = len(col) // ck["size"] if ck["size"] else 0
        out += col[i * fb:(i + 1) * fb]
    return out


def leaf_of(ck, key):
    return ck["leaves"][key - (ck["next_key"] - ck["size"])]


def xxh3(b):
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib.XXH3_64bits(b, len(b))


# ---- helpers -------------------------------------------------------------

def all_dtypes_spec(capacity, **kw):
    fields = [
        pb.Field(name="obs", dtype=pb.FLOAT32, shape=[3]),
        pb.Field(name="action", dtype=pb.INT32),
        pb.Field(name="big", dtype=pb.INT64, shape=[2, 2]),
        pb.Field(name="img", dtype=pb.UINT8, shape=[5, 3]),
        pb.Field(name="done", dtype=pb.BOOL),
        pb.Field(name="mask", dtype=pb.BOOL, shape=[4]),
    ]
    return pb.WorkloadSpec(name="dtypes", fields=fields, capacity=capacity, seed=11, fanout=4,
                           **kw)


def all_dtypes_rows(n, start):
    cols = [
        b"".join(struct.pack("<3f", start + i, -0.5 * i, 1e-3 * i) for i in range(n)),
        b"".join(struct.pack("<i", -(start + i)) for i in range(n)),
        b"".join(struct.pack("<4q", start + i, -(start + i) << 33, 7, i) for i in range(n)),
        b"".join(bytes((start + i + j) & 255 for j in range(15)) for i in range(n)),
        bytes((start + i) & 1 for i in range(n)),
        b"".join(bytes(((start + i) >> j) & 1 for j in range(4)) for i in range(n)),
    ]
    return pb.RowBatch(count=n, columns=cols)


def ident_rows(actor, seq, n):
    """CartPole rows whose bytes name (actor, seq, i): an acknowledged key's
    row can be checked byte for byte."""
    obs = b"".join(struct.pack("<4f", actor, seq, i, 0.5) for i in range(n))
    act = b"".join(struct.pack("<i", actor * 1000003 + seq) for _ in range(n))
    rew = b"".join(struct.pack("<f", i) for i in range(n))
    nxt = b"".join(struct.pack("<4f", seq, i, actor, -1) for i in range(n))
    done = bytes(i & 1 for i in range(n))
    return pb.RowBatch(count=n, columns=[obs, act, rew, nxt, done])


def row_of(batch, i):
    out = b""
    for col in batch.columns:
        fb = len(col) // batch.count
        out += col[i * fb:(i + 1) * fb]
    return out


class Base(unittest.TestCase):
    extra = ()

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-durable-")
        self.d = None

    def tearDown(self):
        if self.d is not None and self.d.alive():
            self.d.stop(SIGKILL)
        shutil.rmtree(self.state, ignore_errors=True)

    def start(self, *extra):
        self.d = Daemon(self.state, *self.extra, *extra)
        return self.d

    def crash(self):
        """kill -9: no drain, no final checkpoint."""
        self.d.stop(SIGKILL)

    def restart(self, *extra):
        if self.d is not None and self.d.alive():
            self.crash()
        return self.start(*extra)

    def md(self, w):
        return ((TOKEN_KEY, w.token),)

    def admin_md(self):
        with open(os.path.join(self.state, "admin.token")) as f:
            return ((TOKEN_KEY, f.read().strip()),)

    def describe(self, w):
        return self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10)

    def checkpoint(self, w):
        return self.d.stub.Checkpoint(pb.CheckpointRequest(workload_id=w.id), metadata=self.md(w),
                                      timeout=60)

    def export(self, w):
        r = self.d.stub.ExportWorkload(pb.ExportWorkloadRequest(workload_id=w.id),
                                       metadata=self.md(w), timeout=60)
        return r.data

    def sample(self, w, n=16, stratified=False):
        return self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=n, beta=0.5,
                                                   stratified=stratified),
                                  metadata=self.md(w), timeout=10)

    def assert_code(self, code, fn, *a, **kw):
        with self.assertRaises(grpc.RpcError) as cm:
            fn(*a, **kw)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        return cm.exception

    def ckdir(self, w):
        return os.path.join(self.state, "checkpoints", w.id)


# ---- checkpoints and restore ---------------------------------------------

class TestCheckpointRestore(Base):
    def fill(self, w, cap):
        """Rows of every dtype, wrapping the table several times, with and
        without priorities, and updates (some stale)."""
        k = 0
        for i in range(14):
            n = 7 + (i * 5) % 23
            prio = [0.25 * ((k + j) % 9) for j in range(n)] if i % 3 else []
            r = self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id,
                                                         rows=all_dtypes_rows(n, k),
                                                         priorities=prio),
                                        metadata=self.md(w), timeout=10)
            k += n
            if i % 4 == 1:
                keys = [max(0, k - cap - 3), k - 1, k - 2]
                self.d.stub.UpdatePriorities(pb.UpdatePrioritiesRequest(
                    workload_id=w.id, keys=keys, priorities=[3.0, 0.5, 2.0]),
                    metadata=self.md(w), timeout=10)
            self.sample(w, min(8, k, cap), stratified=bool(i % 2))
        self.assertGreater(k, 3 * cap)
        return r

    def test_round_trip_every_dtype_after_kill(self):
        cap = 50
        self.start()
        w = self.d.stub.RegisterWorkload(all_dtypes_spec(cap), timeout=10)
        self.fill(w, cap)
        before = self.describe(w).counters
        exp_before = parse_ckpt(self.export(w))
        c = self.checkpoint(w)
        self.assertEqual(list(c.workload_ids), [w.id])
        self.assertEqual(c.checkpoints[0].items, cap)
        self.assertGreater(c.checkpoints[0].bytes, 0)
        # What the live daemon samples next, from the checkpoint's state.
        a = [self.sample(w, 16), self.sample(w, 16, True)]
        self.restart()
        dsc = self.describe(w)
        self.assertIn("checkpoint 1", dsc.durability.restored)
        self.assertEqual(dsc.counters.inserts, before.inserts)
        self.assertEqual(dsc.counters.updates, before.updates)
        self.assertEqual(dsc.counters.stale_updates, before.stale_updates)
        self.assertEqual(dsc.counters.size, cap)
        self.assertEqual(dsc.durability.last.generation, 1)
        b = [self.sample(w, 16), self.sample(w, 16, True)]
        for x, y in zip(a, b):
            self.assertEqual(list(x.keys), list(y.keys))
            self.assertEqual(list(x.probabilities), list(y.probabilities))
            self.assertEqual(list(x.weights), list(y.weights))
            self.assertEqual(list(x.rows.columns), list(y.rows.columns))
        # Every row, leaf and counter, byte for byte (samples aside).
        exp_after = parse_ckpt(self.export(w))
        for k in ("next_key", "size", "max_p", "inserts", "updates", "stale", "leaves", "cols"):
            self.assertEqual(exp_before[k], exp_after[k], k)
        # Stale keys stay stale; a key never issued stays unknown.
        u = self.d.stub.UpdatePriorities(pb.UpdatePrioritiesRequest(
            workload_id=w.id, keys=[0, exp_after["next_key"] - 1], priorities=[1.0, 1.0]),
            metadata=self.md(w), timeout=10)
        self.assertEqual((u.applied, u.stale), (1, 1))
        self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.d.stub.UpdatePriorities,
                         pb.UpdatePrioritiesRequest(workload_id=w.id,
                                                    keys=[exp_after["next_key"]],
                                                    priorities=[1.0]),
                         metadata=self.md(w), timeout=10)

    def test_sigterm_checkpoints_and_none_keeps_nothing(self):
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=300), timeout=10)
        n = self.d.stub.RegisterWorkload(cartpole_spec(capacity=300, durability="none"),
                                         timeout=10)
        for x in (w, n):
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=x.id, rows=rows(120)),
                                    metadata=self.md(x), timeout=10)
        self.assert_code(grpc.StatusCode.FAILED_PRECONDITION, self.checkpoint, n)
        self.assertEqual(self.d.stop(), 0)
        self.assertIn("final checkpoints: 1 written", "".join(self.d.lines))
        self.assertFalse(os.path.exists(self.ckdir(n)))
        self.start()
        self.assertEqual(self.describe(w).counters.size, 120)
        dn = self.describe(n)
        self.assertEqual(dn.counters.size, 0)
        self.assertEqual(dn.durability.mode, "none")
        self.assertIn("durability none", dn.durability.restored)

    def test_never_checkpointed_comes_back_empty_and_says_so(self):
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=300), timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(10)),
                                metadata=self.md(w), timeout=10)
        self.restart()
        d = self.describe(w)
        self.assertEqual(d.counters.size, 0)
        self.assertEqual(d.durability.restored, "empty: no checkpoint yet")

    def test_keep_last_n_and_periodic(self):
        # No periodic checkpoints for the first workload (the daemon's
        # interval 0), so the generations are the RPC's alone however long
        # the loop takes; the second asks for one every second.
        self.start("--checkpoint-keep", "3", "--checkpoint-interval-s", "0")
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=300), timeout=10)
        for i in range(6):
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(5, 5 * i)),
                                    metadata=self.md(w), timeout=10)
            self.checkpoint(w)
        ck = sorted(f for f in os.listdir(self.ckdir(w)) if f.endswith(".rdc"))
        self.assertEqual(ck, ["ckpt-%016x.rdc" % g for g in (4, 5, 6)])
        # Periodic: a change, then within the interval (plus the periodic
        # thread's second) a checkpoint; the deadline is for a loaded machine.
        p = self.d.stub.RegisterWorkload(cartpole_spec(capacity=300, checkpoint_interval_s=1),
                                         timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=p.id, rows=rows(5, 99)),
                                metadata=self.md(p), timeout=10)
        deadline = time.monotonic() + 60
        while self.describe(p).durability.last.generation < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertGreaterEqual(self.describe(p).durability.last.generation, 1)
        # Nothing changed since: no more checkpoints, of either workload.
        g = self.describe(p).durability.last.generation
        time.sleep(2.5)
        self.assertEqual(self.describe(p).durability.last.generation, g)
        self.assertEqual(self.describe(w).durability.last.generation, 6)

    def test_checkpoint_rpc_authorization(self):
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=300), timeout=10)
        v = self.d.stub.RegisterWorkload(cartpole_spec(capacity=300), timeout=10)
        self.assert_code(grpc.StatusCode.UNAUTHENTICATED, self.d.stub.Checkpoint,
                         pb.CheckpointRequest(workload_id=w.id), timeout=10)
        self.assert_code(grpc.StatusCode.PERMISSION_DENIED, self.d.stub.Checkpoint,
                         pb.CheckpointRequest(workload_id=w.id), metadata=self.md(v), timeout=10)
        self.assert_code(grpc.StatusCode.PERMISSION_DENIED, self.d.stub.Checkpoint,
                         pb.CheckpointRequest(all=True), metadata=self.md(w), timeout=10)
        self.d.stub.Checkpoint(pb.CheckpointRequest(workload_id=w.id), metadata=self.admin_md(),
                               timeout=10)
        r = self.d.stub.Checkpoint(pb.CheckpointRequest(all=True), metadata=self.admin_md(),
                                   timeout=10)
        self.assertEqual(sorted(r.workload_ids), sorted([w.id, v.id]))
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=v.id), metadata=self.md(v), timeout=10)
        self.assertFalse(os.path.exists(self.ckdir(v)), "a deleted workload's files stay")


# ---- a learner that resumes ----------------------------------------------

class TestLearnerResumes(Base):
    def train(self, w, steps):
        return self.d.stub.TrainStep(pb.TrainStepRequest(workload_id=w.id, steps=steps),
                                     metadata=self.md(w), timeout=120)

    def test_weights_steps_and_versions_continue(self):
        self.start()
        spec = cartpole_spec(capacity=2000, learner=pb.LearnerSpec(
            algorithm="dqn", hidden=[32, 32], batch_size=32, num_actions=2))
        # Twins: the same spec, seed and rows train the same (strict loop);
        # the twin trains on without a restart and says what should follow.
        w = self.d.stub.RegisterWorkload(spec, timeout=120)
        twin = self.d.stub.RegisterWorkload(spec, timeout=120)
        for x in (w, twin):
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=x.id, rows=rows(600)),
                                    metadata=self.md(x), timeout=10)
        t1 = self.train(w, 200)
        self.train(twin, 200)
        g1 = self.d.stub.GetWeights(pb.GetWeightsRequest(workload_id=w.id), metadata=self.md(w),
                                    timeout=10)
        self.assertTrue(self.checkpoint(w).checkpoints[0].learner_full)
        tt = self.train(twin, 20)
        gt = self.d.stub.GetWeights(pb.GetWeightsRequest(workload_id=twin.id),
                                    metadata=self.md(twin), timeout=10)
        self.restart()
        d = self.describe(w)
        self.assertEqual(d.learner.steps, 200)
        g2 = self.d.stub.GetWeights(pb.GetWeightsRequest(workload_id=w.id, have_version=0),
                                    metadata=self.md(w), timeout=10)
        self.assertGreater(g2.version, g1.version, "weight versions went back")
        self.assertEqual(g2.weights, g1.weights, "the restored learner has other weights")
        # An actor holding the old version still gets the weights.
        g3 = self.d.stub.GetWeights(pb.GetWeightsRequest(workload_id=w.id,
                                                         have_version=g1.version),
                                    metadata=self.md(w), timeout=10)
        self.assertEqual(g3.weights, g1.weights)
        t2 = self.train(w, 20)
        self.assertEqual(self.describe(w).learner.steps, 220)
        self.assertGreater(t2.weight_version, g2.version)
        # The loss goes on as if there had been no restart: the twin's.
        self.assertEqual(t2.loss_mean, tt.loss_mean, (t1.loss_mean, t2.loss_mean, tt.loss_mean))
        g4 = self.d.stub.GetWeights(pb.GetWeightsRequest(workload_id=w.id), metadata=self.md(w),
                                    timeout=10)
        self.assertEqual(g4.weights, gt.weights)


# ---- corrupt checkpoints -------------------------------------------------

class TestCorruption(Base):
    def two_checkpoints(self):
        """Checkpoint 1 holds 100 rows, checkpoint 2 holds 150."""
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=1000), timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(100)),
                                metadata=self.md(w), timeout=10)
        self.checkpoint(w)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(50, 100)),
                                metadata=self.md(w), timeout=10)
        self.checkpoint(w)
        self.crash()
        return w, os.path.join(self.ckdir(w), "ckpt-%016x.rdc" % 2)

    def expect_previous(self, w, reason):
        self.start()
        d = self.describe(w)
        self.assertEqual(d.counters.size, 100, d.durability.restored)
        self.assertIn("checkpoint 1", d.durability.restored)
        log = self.d.log_after("cannot be used")
        self.assertIn(reason, log)
        self.assertTrue(os.path.exists(os.path.join(self.ckdir(w), "ckpt-%016x.rdc.bad" % 2)))
        # The restored state was checkpointed anew (3), so the next start
        # does not depend on the damaged file.
        self.assertGreaterEqual(d.durability.last.generation, 3)

    def test_flipped_byte(self):
        w, path = self.two_checkpoints()
        with open(path, "r+b") as f:
            data = bytearray(f.read())
            data[len(data) // 2] ^= 0x10
            f.seek(0)
            f.write(data)
        self.expect_previous(w, "checksum mismatch")

    def test_truncated(self):
        w, path = self.two_checkpoints()
        size = os.path.getsize(path)
        os.truncate(path, size - 100)
        self.expect_previous(w, "truncated")

    def test_wrong_version(self):
        w, path = self.two_checkpoints()
        with open(path, "r+b") as f:
            h = bytearray(f.read(64))
            struct.pack_into("<I", h, 8, 99)
            struct.pack_into("<Q", h, 56, xxh3(bytes(h[:56])))
            f.seek(0)
            f.write(h)
        self.expect_previous(w, "version 99")

    def test_empty_file(self):
        w, path = self.two_checkpoints()
        open(path, "wb").close()
        self.expect_previous(w, "empty")

    def test_other_spec_comes_back_empty(self):
        w, _ = self.two_checkpoints()
        db = sqlite3.connect(os.path.join(self.state, "replayd.db"))
        (blob,) = db.execute("SELECT spec FROM workloads WHERE id = ?", (w.id,)).fetchone()
        spec = pb.WorkloadSpec.FromString(blob)
        spec.capacity = 999
        db.execute("UPDATE workloads SET spec = ? WHERE id = ?", (spec.SerializeToString(), w.id))
        db.commit()
        db.close()
        self.start()
        d = self.describe(w)
        self.assertEqual(d.counters.size, 0)
        self.assertIn("empty: no checkpoint could be used", d.durability.restored)
        self.assertIn("different spec: capacity 1000, not 999", d.durability.restored)
        self.assertIn("different spec", self.d.log_after("different spec"))


# ---- journal mode and kill -9 --------------------------------------------

class Actors:
    """Threads that stream InsertBatch calls with explicit priorities and
    record what was acknowledged: key -> (row bytes, priority)."""

    def __init__(self, port, w, n=3, batch=32):
        self.acked = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors = []
        self.threads = [threading.Thread(target=self.run, args=(port, w, a, batch), daemon=True)
                        for a in range(n)]
        self.seq0 = random.randrange(1 << 20)
        for t in self.threads:
            t.start()

    def run(self, port, w, actor, batch):
        ch = grpc.insecure_channel("127.0.0.1:%d" % port)
        stub = pb_grpc().ReplayStub(ch)
        seq = self.seq0
        while not self.stop.is_set():
            seq += 1
            rb = ident_rows(actor, seq, batch)
            prio = [0.5 * ((seq + i) % 8 + 1) for i in range(batch)]
            try:
                r = stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rb, priorities=prio),
                                     metadata=((TOKEN_KEY, w.token),), timeout=10)
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.OK:
                    self.errors.append("OK raised")
                return  # the daemon died: nothing acknowledged
            with self.lock:
                for i, k in enumerate(r.keys):
                    self.acked[k] = (row_of(rb, i), prio[i])
        ch.close()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join(15)


def pb_grpc():
    import replayd_pb2_grpc
    return replayd_pb2_grpc


class TestKill9(Base):
    ITER = 22

    def verify(self, w, acked, scale_check=True):
        ck = parse_ckpt(self.export(w))
        self.assertEqual(ck["inserts"], ck["next_key"], "inserts counter vs key counter")
        self.assertEqual(ck["size"], min(ck["next_key"], ck["capacity"]))
        lo = ck["next_key"] - ck["size"]
        missing = [k for k in acked if k >= ck["next_key"]]
        self.assertEqual(missing, [], "acknowledged keys lost")
        for k, (row, prio) in acked.items():
            if k < lo:
                continue  # evicted since by the ring: legitimately gone
            self.assertEqual(row_bytes(ck, k), row, "row of key %d" % k)
            if scale_check:
                self.assertEqual(leaf_of(ck, k), int(prio * ck["scale"] + 0.5),
                                 "priority of key %d" % k)
        return ck

    def test_journal_mode_loses_no_acknowledged_insert(self):
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=200000, durability="journal",
                                                       alpha=1.0, epsilon=0.0), timeout=10)
        acked = {}
        rng = random.Random(22)
        t_end = time.monotonic() + 240
        for it in range(self.ITER):
            actors = Actors(self.d.port, w, n=3, batch=rng.choice([1, 16, 64]))
            time.sleep(rng.uniform(0.05, 0.4))
            if it % 5 == 4:
                self.checkpoint(w)  # checkpoints between crashes truncate the journal
            time.sleep(rng.uniform(0.0, 0.1))
            self.crash()
            actors.join()
            self.assertEqual(actors.errors, [])
            acked.update(actors.acked)
            self.start()
            self.verify(w, acked)
            self.assertLess(time.monotonic(), t_end, "the kill -9 loop took too long")
        self.assertGreater(len(acked), 1000)
        self.assertGreaterEqual(self.ITER, 20)

    def test_checkpoint_mode_loses_only_after_the_last_checkpoint(self):
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=200000, alpha=1.0, epsilon=0.0),
                                         timeout=10)
        safe = {}
        rng = random.Random(23)
        for it in range(self.ITER):
            actors = Actors(self.d.port, w, n=2, batch=32)
            time.sleep(rng.uniform(0.05, 0.2))
            with actors.lock:
                before = dict(actors.acked)
            self.checkpoint(w)  # everything acknowledged before it is in it
            time.sleep(rng.uniform(0.0, 0.2))
            self.crash()
            actors.join()
            safe.update(before)
            self.start()
            ck = self.verify(w, safe)
            # Nothing from before the checkpoint is lost, and what came
            # after it may be: the key counter is at least what it held.
            self.assertGreaterEqual(ck["next_key"], max(safe) + 1 if safe else 0)
        self.assertGreater(len(safe), 500)

    def test_torn_tail_is_dropped(self):
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=1000, durability="journal"),
                                         timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(40)),
                                metadata=self.md(w), timeout=10)
        self.crash()
        seg = os.path.join(self.ckdir(w), "journal-%016x.log" % 0)
        good = os.path.getsize(seg)
        with open(seg, "ab") as f:  # a record cut short by the crash
            f.write(b"RDJR" + b"\x01" * 40)
        self.start()
        self.assertEqual(self.describe(w).counters.size, 40)
        self.assertIn("torn", self.d.log_after("torn"))
        self.assertLessEqual(os.path.getsize(seg), good, "the torn tail was not cut off")
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(10, 40)),
                                metadata=self.md(w), timeout=10)
        self.crash()
        self.start()
        self.assertEqual(self.describe(w).counters.size, 50)

    def test_stream_and_updates_wait_for_the_journal(self):
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=1000, durability="journal",
                                                       alpha=1.0, epsilon=0.0), timeout=10)

        def gen():
            for i in range(5):
                yield pb.InsertRequest(workload_id=w.id, rows=rows(20, 20 * i))

        self.assertEqual(self.d.stub.Insert(gen(), metadata=self.md(w), timeout=10).inserted, 100)
        self.d.stub.UpdatePriorities(pb.UpdatePrioritiesRequest(
            workload_id=w.id, keys=[3, 4], priorities=[6.0, 7.0]), metadata=self.md(w), timeout=10)
        self.crash()
        self.start()
        ck = parse_ckpt(self.export(w))
        self.assertEqual(ck["size"], 100)
        self.assertEqual(leaf_of(ck, 3), int(6.0 * ck["scale"]))
        self.assertEqual(leaf_of(ck, 4), int(7.0 * ck["scale"]))
        d = self.describe(w).durability
        self.assertEqual(d.mode, "journal")
        self.assertIn("journal", d.restored)


# ---- export and import ---------------------------------------------------

class TestExportImport(Base):
    def test_move_between_servers(self):
        self.start()
        w = self.d.stub.RegisterWorkload(all_dtypes_spec(64), timeout=10)
        for i in range(5):
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id,
                                                     rows=all_dtypes_rows(30, 30 * i),
                                                     priorities=[1.0 + j for j in range(30)]),
                                    metadata=self.md(w), timeout=10)
        data = self.export(w)
        a = self.sample(w, 16)
        other = tempfile.mkdtemp(prefix="replayd-import-")
        try:
            d2 = Daemon(other)
            v = d2.stub.ImportWorkload(pb.ImportWorkloadRequest(data=data, name="moved"),
                                       timeout=60)
            self.assertNotEqual(v.id, w.id)
            self.assertEqual(len(v.token), 64)
            self.assertEqual(v.spec.name, "moved")
            self.assertEqual(v.counters.size, 64)
            b = d2.stub.Sample(pb.SampleRequest(workload_id=v.id, batch_size=16, beta=0.5),
                               metadata=((TOKEN_KEY, v.token),), timeout=10)
            self.assertEqual(list(a.keys), list(b.keys))
            self.assertEqual(list(a.rows.columns), list(b.rows.columns))
            # Imported data survives a crash of the importing server.
            d2.stop(SIGKILL)
            d2 = Daemon(other)
            self.assertEqual(d2.stub.DescribeWorkload(pb.WorkloadRef(id=v.id),
                                                      timeout=10).counters.size, 64)
            # A damaged file is refused and registers nothing.
            bad = bytearray(data)
            bad[len(bad) // 3] ^= 1
            with self.assertRaises(grpc.RpcError) as cm:
                d2.stub.ImportWorkload(pb.ImportWorkloadRequest(data=bytes(bad)), timeout=60)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(len(d2.stub.ListWorkloads(pb.ListWorkloadsRequest(),
                                                       timeout=10).workloads), 1)
            self.assertEqual(d2.stop(), 0)
        finally:
            shutil.rmtree(other, ignore_errors=True)

    def test_export_bounded_by_the_message_limit(self):
        self.start("--max-message-bytes", "64K")
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=5000), timeout=10)
        for i in range(5):
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(1000, 1000 * i)),
                                    metadata=self.md(w), timeout=10)
        e = self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.export, w)
        self.assertIn("max-message-bytes", e.details())

    @unittest.skipIf(REPLAYCTL is None, "no replayctl given")
    def test_replayctl(self):
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=500), timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(300)),
                                metadata=self.md(w), timeout=10)
        base = [REPLAYCTL, "--server", "127.0.0.1:%d" % self.d.port]
        admin = ["--admin-token-file", os.path.join(self.state, "admin.token")]
        out = subprocess.run(base + ["checkpoint", w.id, "--token", w.token], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("checkpoint 1", out.stdout)
        out = subprocess.run(base + admin + ["checkpoint", "--all"], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn(w.id, out.stdout)
        path = os.path.join(self.state, "export.rdc")
        out = subprocess.run(base + admin + ["export", w.id, path], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(path, "rb") as f:
            self.assertEqual(parse_ckpt(f.read())["size"], 300)
        out = subprocess.run(base + ["import", path, "--name", "copy"], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("\"copy\", 300 items", out.stdout)
        self.assertIn("token", out.stdout)
        out = subprocess.run(base + ["describe", w.id], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("durability: checkpoint", out.stdout)
        self.assertIn("last checkpoint 2 at", out.stdout)


# ---- faults on a small real filesystem -----------------------------------

def try_mount(path, size):
    """A tmpfs of size bytes at path; a reason string when we cannot."""
    if os.geteuid() != 0:
        return "not root: cannot mount a small filesystem for the fault tests"
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % size, "tmpfs", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "cannot mount a tmpfs: " + r.stderr.strip()
    return None


def umount(path):
    subprocess.run(["umount", "-l", path], capture_output=True)


class TestFaults(Base):
    def setUp(self):
        super().setUp()
        self.mnt = os.path.join(self.state, "small")
        why = try_mount(self.mnt, 2 << 20)
        if why:
            self.skipTest(why)

    def tearDown(self):
        if self.d is not None and self.d.alive():
            self.d.stop(SIGKILL)
        umount(self.mnt)
        super().tearDown()

    def test_disk_full_keeps_serving_and_the_previous_checkpoint(self):
        self.start("--checkpoint-dir", self.mnt)
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=200000), timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(1000)),
                                metadata=self.md(w), timeout=10)
        self.checkpoint(w)  # about 40 KiB: fits
        for i in range(1, 80):  # about 3.2 MiB: does not
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id,
                                                     rows=rows(1000, 1000 * i)),
                                    metadata=self.md(w), timeout=10)
        e = self.assert_code(grpc.StatusCode.INTERNAL, self.checkpoint, w)
        self.assertIn("No space left on device", e.details())
        self.assertEqual([f for f in os.listdir(os.path.join(self.mnt, w.id))
                          if f.endswith(".tmp")], [], "the temporary file stayed")
        self.assertEqual(self.sample(w, 8).table_size, 80000, "the daemon stopped serving")
        d = self.describe(w).durability
        self.assertIn("No space left", d.last_error)
        self.assertEqual(d.last.generation, 1)
        self.crash()
        self.start("--checkpoint-dir", self.mnt)
        self.assertEqual(self.describe(w).counters.size, 1000)

    def test_read_only_directory(self):
        self.start("--checkpoint-dir", self.mnt)
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=1000), timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(100)),
                                metadata=self.md(w), timeout=10)
        self.checkpoint(w)
        r = subprocess.run(["mount", "-o", "remount,ro", self.mnt], capture_output=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        e = self.assert_code(grpc.StatusCode.INTERNAL, self.checkpoint, w)
        self.assertIn("Read-only file system", e.details())
        self.assertEqual(self.sample(w, 4).table_size, 100)
        subprocess.run(["mount", "-o", "remount,rw", self.mnt], capture_output=True)
        self.checkpoint(w)

    def test_journal_write_failure_is_never_ok(self):
        self.start("--checkpoint-dir", self.mnt)
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=200000, durability="journal"),
                                         timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(100)),
                                metadata=self.md(w), timeout=10)
        filler = os.path.join(self.mnt, "filler")
        with open(filler, "wb") as f:  # take what is left
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        codes = []
        for i in range(200):  # the journal may have zeroed space left: use it up
            if codes and codes[-1] != grpc.StatusCode.OK and len(codes) > 3:
                break
            try:
                self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id,
                                                         rows=rows(500, 100 + 500 * i)),
                                        metadata=self.md(w), timeout=10)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as e:
                codes.append(e.code())
        # What still fitted was written and is OK; from the first failure
        # on, nothing is OK, and a failure is INTERNAL or UNAVAILABLE.
        first = next(i for i, c in enumerate(codes) if c != grpc.StatusCode.OK)
        self.assertTrue(set(codes[first:]) <= {grpc.StatusCode.INTERNAL,
                                               grpc.StatusCode.UNAVAILABLE}, codes)
        self.assertIn("journal", self.describe(w).durability.journal_error)
        # Still refused after space comes back, until a checkpoint succeeds.
        os.unlink(filler)
        e = self.assert_code(grpc.StatusCode.INTERNAL, self.d.stub.InsertBatch,
                             pb.InsertRequest(workload_id=w.id, rows=rows(1)),
                             metadata=self.md(w), timeout=10)
        self.assertIn("until a checkpoint", e.details())
        self.checkpoint(w)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(1)),
                                metadata=self.md(w), timeout=10)
        size = self.describe(w).counters.size
        self.crash()
        self.start("--checkpoint-dir", self.mnt)
        self.assertEqual(self.describe(w).counters.size, size)


class TestReadOnlyChmod(Base):
    """The read-only case through permissions, for a daemon that is not
    root (root ignores them: as root the daemon runs as nobody here)."""

    def test_chmod(self):
        runner = []
        if os.geteuid() == 0:
            if shutil.which("setpriv") is None:
                self.skipTest("root without setpriv: permissions cannot stop the daemon")
            os.chown(self.state, 65534, 65534)
            os.chmod(self.state, 0o755)
            runner = ["--reuid=65534", "--regid=65534", "--clear-groups"]
        self.d = Daemon(self.state, env=None) if not runner else self.run_as(runner)
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=1000), timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(10)),
                                metadata=self.md(w), timeout=10)
        self.checkpoint(w)
        os.chmod(self.ckdir(w), 0o555)
        try:
            e = self.assert_code(grpc.StatusCode.INTERNAL, self.checkpoint, w)
            self.assertIn("Permission denied", e.details())
            self.assertEqual(self.sample(w, 4).table_size, 10)
        finally:
            os.chmod(self.ckdir(w), 0o700)
        self.checkpoint(w)

    def run_as(self, args):
        import replayd_test  # Daemon reads the executable from here
        real = replayd_test.REPLAYD
        wrapper = os.path.join(self.state, "as-nobody.sh")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec setpriv %s %s \"$@\"\n" % (" ".join(args), real))
        os.chmod(wrapper, 0o755)
        replayd_test.REPLAYD = wrapper
        try:
            return Daemon(self.state)
        finally:
            replayd_test.REPLAYD = real

    def admin_md(self):
        return super().admin_md()


if __name__ == "__main__":
    unittest.main(verbosity=2)
