#!/usr/bin/python3
"""SIGTERM while calls are in every state a call can be in.

The daemon must exit 0, within its grace period plus a few seconds, and
never abort (gRPC's "assertion failed: grpc_cq_begin_op" came from a batch
started on a completion queue that shutdown had already closed). Each
repetition opens, on a fresh daemon over the same state directory:
  - an Insert stream idle after one message,
  - an Insert stream in the middle of large messages,
  - Insert streams that half-close right away (half-closed, reply pending),
  - Sample calls in a loop (a sample in flight),
  - a TrainStep of many steps on a hosted learner (a train-step in flight),
  - a Register and a Plan (queued placements),
then sends SIGTERM after a random delay, so the signal lands at many
points of those calls' lives.

usage: test_shutdown.py REPLAYD_EXE PROTO_DIR [REPETITIONS]
"""
import os
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
import unittest

REPS = int(sys.argv[3]) if len(sys.argv) > 3 else 30
del sys.argv[3:]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from replayd_test import Daemon, pb, TOKEN_KEY, grpc, cartpole_spec, rows  # noqa: E402

GRACE_MS = 300
# Statuses a client may see from a call the server drained or cancelled.
ENDED = {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
         grpc.StatusCode.ABORTED, grpc.StatusCode.DEADLINE_EXCEEDED,
         grpc.StatusCode.RESOURCE_EXHAUSTED}


def learner_spec():
    spec = cartpole_spec(capacity=4096)
    spec.learner.CopyFrom(pb.LearnerSpec(algorithm="dqn", hidden=[32, 32], batch_size=32,
                                         num_actions=2))
    return spec


class TestSigterm(unittest.TestCase):
    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-shutdown-")

    def tearDown(self):
        shutil.rmtree(self.state, ignore_errors=True)

    def start(self):
        return Daemon(self.state, "--shutdown-grace-ms", str(GRACE_MS), "--threads", "2")

    def admin(self):
        with open(os.path.join(self.state, "admin.token")) as f:
            return ((TOKEN_KEY, f.read().strip()),)

    def test_sigterm_in_every_call_state(self):
        d = self.start()
        replay = d.stub.RegisterWorkload(cartpole_spec(capacity=100000), timeout=10)
        hosted = d.stub.RegisterWorkload(learner_spec(), timeout=60)
        self.assertEqual(d.stop(), 0)
        rng = random.Random(20)
        seen = {}
        for rep in range(REPS):
            d = self.start()
            outcomes = self.storm(d, replay, hosted, rng)
            for name, code in outcomes:
                seen.setdefault(name, set()).add(code)
            t0 = time.monotonic()
            try:
                d.proc.wait(GRACE_MS / 1000 + 15)
            except Exception:  # noqa: BLE001 - a hang is reported below
                pass
            took = time.monotonic() - t0
            rc = d.stop(timeout=10)
            log = "".join(d.lines)
            self.assertNotIn("assertion failed", log, f"repetition {rep}")
            self.assertEqual(rc, 0, f"repetition {rep}: exit {rc}\n{log[-3000:]}")
            self.assertLess(took, GRACE_MS / 1000 + 8, f"repetition {rep}: stop took {took:.1f} s")
            for name, code in outcomes:
                self.assertIn(code, ENDED, f"repetition {rep}: {name} ended with {code}")
        for name, codes in sorted(seen.items()):
            print(f"  {name}: ended with {sorted(c.name for c in codes)}", flush=True)
        # Every kind of call was caught in flight at least once.
        for name in ("idle stream", "large stream", "half-closed stream", "sample",
                     "train step"):
            self.assertIn(name, seen)
        # The daemon still restores both workloads after all that.
        d = self.start()
        listed = {w.id for w in d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=10).workloads}
        self.assertEqual(listed, {replay.id, hosted.id})
        self.assertEqual(d.stop(), 0)

    def storm(self, d, replay, hosted, rng):
        """Start every kind of call, SIGTERM the daemon after a random delay,
        and return (call kind, final status) for each."""
        md = ((TOKEN_KEY, replay.token),)
        hmd = ((TOKEN_KEY, hosted.token),)
        # Some rows for the samplers and the learner before the storm.
        d.stub.InsertBatch(pb.InsertRequest(workload_id=replay.id, rows=rows(512)), metadata=md,
                           timeout=10)
        d.stub.InsertBatch(pb.InsertRequest(workload_id=hosted.id, rows=rows(512)),
                           metadata=hmd, timeout=10)
        outcomes = []
        lock = threading.Lock()
        release = threading.Event()  # loops start no new call once set
        hold = threading.Event()     # open streams keep going until the daemon is gone

        def record(name, fn):
            try:
                fn()
                code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                code = e.code()
            with lock:
                outcomes.append((name, code))

        def idle_stream():
            def gen():
                yield pb.InsertRequest(workload_id=replay.id, rows=rows(8))
                hold.wait(30)
            d.stub.Insert(gen(), metadata=md, timeout=30)

        big = rows(20000)

        def large_stream():
            def gen():
                while not hold.is_set():
                    yield pb.InsertRequest(workload_id=replay.id, rows=big)
            d.stub.Insert(gen(), metadata=md, timeout=30)

        def half_closed():
            while not release.is_set():
                d.stub.Insert(iter([pb.InsertRequest(workload_id=replay.id, rows=rows(64))] * 8),
                              metadata=md, timeout=30)

        def sample():
            while not release.is_set():
                d.stub.Sample(pb.SampleRequest(workload_id=replay.id, batch_size=256), metadata=md,
                              timeout=30)

        def train():
            d.stub.TrainStep(pb.TrainStepRequest(workload_id=hosted.id, steps=65536),
                             metadata=hmd, timeout=30)

        def placements():
            spec = learner_spec()
            spec.learner.hidden[:] = [rng.randrange(8, 64), 16]
            d.stub.Plan(pb.PlanRequest(spec=spec), metadata=self.admin(), timeout=30)

        calls = [("idle stream", idle_stream), ("large stream", large_stream),
                 ("half-closed stream", half_closed), ("half-closed stream", half_closed),
                 ("sample", sample), ("sample", sample), ("train step", train),
                 ("plan", placements)]
        threads = [threading.Thread(target=record, args=c, daemon=True) for c in calls]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.02, 0.25))
        d.proc.send_signal(signal.SIGTERM)
        # Clients that loop stop starting new calls once the signal is sent;
        # open streams stay open until the daemon has exited.
        release.set()
        try:
            d.proc.wait(GRACE_MS / 1000 + 15)
        except Exception:  # noqa: BLE001 - the caller reports a hang
            pass
        hold.set()
        for t in threads:
            t.join(GRACE_MS / 1000 + 20)
            self.assertFalse(t.is_alive(), "a client call never ended")
        return outcomes


if __name__ == "__main__":
    unittest.main(verbosity=2)
