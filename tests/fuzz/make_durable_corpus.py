#!/usr/bin/python3
"""Write the seeds of fuzz_checkpoint and fuzz_journal
(tests/fuzz/corpus/<harness>/seed-*): real files written by a real
daemon, so that the fuzzer starts from what the daemon reads.

- fuzz_checkpoint: checkpoints (ckpt-*.rdc) and exports (ExportWorkload's
  bytes) of a replay-only workload that wrapped its table, raw and
  zstd-compressed, of one with a rate limiter (its section), of an empty
  one, and of a hosted DQN learner's workload after a few steps (a
  learner section).
- fuzz_journal: segment 0 of a journal-mode workload (the schema and
  capacity fuzz_journal.c registers) after inserts with and without
  priorities and updates (some stale), the daemon killed with -9; its
  zeroed space kept ahead is trimmed (one seed keeps a little of it).

Rewrites the seeds and leaves regress-* alone.

usage: make_durable_corpus.py REPLAYD PROTO_DIR
       (e.g. build/daemon/replayd api; Debian's python3-grpcio)
"""
import os
import shutil
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
from replayd_test import Daemon, pb, TOKEN_KEY, cartpole_spec, rows, dqn_spec  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")


def write(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def md(w):
    return ((TOKEN_KEY, w.token),)


def newest_ckpt(state, w):
    d = os.path.join(state, "checkpoints", w.id)
    name = sorted(n for n in os.listdir(d) if n.startswith("ckpt-") and n.endswith(".rdc"))[-1]
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def spec(name, **kw):
    s = cartpole_spec(capacity=16, **kw)
    s.name = name
    return s


def fill(d, w, n_batches, size):
    """Inserts with and without priorities, each batch followed by an
    update of a live key, the newest and an overwritten one."""
    k = 0
    for i in range(n_batches):
        prio = [0.25 + (k + j) % 5 for j in range(size)] if i % 2 else []
        d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(size, k),
                                            priorities=prio), metadata=md(w), timeout=10)
        k += size
        d.stub.UpdatePriorities(pb.UpdatePrioritiesRequest(
            workload_id=w.id, keys=[max(0, k - 20), k - 1, k - 2], priorities=[3.0, 0.5, 2.0]),
            metadata=md(w), timeout=10)


def checkpoints(zstd):
    state = tempfile.mkdtemp(prefix="replayd-corpus-")
    d = Daemon(state, "--checkpoint-zstd", str(zstd))
    try:
        suffix = "-zstd" if zstd else ""
        w = d.stub.RegisterWorkload(spec("replay"), timeout=10)
        fill(d, w, 5, 7)
        d.stub.Checkpoint(pb.CheckpointRequest(workload_id=w.id), metadata=md(w), timeout=60)
        write("fuzz_checkpoint", "replay-checkpoint" + suffix, newest_ckpt(state, w))
        e = d.stub.ExportWorkload(pb.ExportWorkloadRequest(workload_id=w.id), metadata=md(w),
                                  timeout=60)
        write("fuzz_checkpoint", "replay-export" + suffix, e.data)
        if zstd:
            return
        # A rate limiter: its counts at the cut are a section of their own.
        lim = spec("limited", rate_limiter=pb.RateLimiterSpec(
            min_size_to_sample=1, samples_per_insert=1.0, error_buffer=100.0))
        w = d.stub.RegisterWorkload(lim, timeout=10)
        fill(d, w, 3, 7)
        d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=4), metadata=md(w), timeout=10)
        d.stub.Checkpoint(pb.CheckpointRequest(workload_id=w.id), metadata=md(w), timeout=60)
        write("fuzz_checkpoint", "limiter-checkpoint", newest_ckpt(state, w))
        empty = d.stub.RegisterWorkload(spec("empty"), timeout=10)
        e = d.stub.ExportWorkload(pb.ExportWorkloadRequest(workload_id=empty.id),
                                  metadata=md(empty), timeout=60)
        write("fuzz_checkpoint", "empty-export", e.data)
        w = d.stub.RegisterWorkload(dqn_spec(capacity=64, hidden=(8,), batch=4), timeout=60)
        cols = rows(40)
        cols.columns[4] = b"\0\0\x80\x3f" * 40  # discount 1.0 (a float column)
        d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=cols), metadata=md(w),
                           timeout=10)
        d.stub.TrainStep(pb.TrainStepRequest(workload_id=w.id, steps=5), metadata=md(w),
                         timeout=120)
        d.stub.Checkpoint(pb.CheckpointRequest(workload_id=w.id), metadata=md(w), timeout=60)
        write("fuzz_checkpoint", "dqn-checkpoint", newest_ckpt(state, w))
        e = d.stub.ExportWorkload(pb.ExportWorkloadRequest(workload_id=w.id), metadata=md(w),
                                  timeout=60)
        write("fuzz_checkpoint", "dqn-export", e.data)
    finally:
        if d.alive():
            d.stop()
        shutil.rmtree(state, ignore_errors=True)


def journal():
    state = tempfile.mkdtemp(prefix="replayd-corpus-")
    d = Daemon(state)
    try:
        # fuzz_journal.c's workload: the cartpole schema, capacity 16, seed 7.
        w = d.stub.RegisterWorkload(spec("journal", durability="journal"), timeout=10)
        fill(d, w, 5, 7)
        d.stop(signal.SIGKILL)  # as a crash leaves it: no final checkpoint
        with open(os.path.join(state, "checkpoints", w.id, "journal-%016x.log" % 0), "rb") as f:
            seg = f.read()
        off = 0  # the records' end: the zeroed space ahead of them is dropped
        while off + 32 <= len(seg) and seg[off:off + 4] == b"RDJR":
            off += 32 + int.from_bytes(seg[off + 16:off + 24], "little")
        records = seg[:off]
        write("fuzz_journal", "inserts-updates", records)
        write("fuzz_journal", "zero-tail", records + b"\0" * 64)
        first = 32 + int.from_bytes(records[16:24], "little")
        write("fuzz_journal", "one-insert", records[:first])
    finally:
        if d.alive():
            d.stop()
        shutil.rmtree(state, ignore_errors=True)


checkpoints(0)
checkpoints(3)
journal()
