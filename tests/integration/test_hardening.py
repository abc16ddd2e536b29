#!/usr/bin/python3
"""What an outside client broke, each kept as a regression test (issue 20):
compressed requests inflated within the message limit (a compression bomb
costs the daemon nothing), and slow calls (Plan, Register) served off the
request threads with bounded queues, so a storm of them stalls no one.

usage: test_hardening.py REPLAYD_EXE PROTO_DIR
"""
import os
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from replayd_test import (TOKEN_KEY, DaemonCase, cartpole_spec, grpc, pb, pbg,  # noqa: E402
                          rows, rss_kib)


def learner_spec(hidden, batch=32):
    spec = cartpole_spec(capacity=4096)
    spec.learner.CopyFrom(pb.LearnerSpec(algorithm="dqn", hidden=list(hidden), batch_size=batch,
                                         num_actions=2))
    return spec


class HardeningBase(DaemonCase):

    def stub(self):
        """A stub whose channel sends any size: the server's limit is what
        is tested."""
        ch = grpc.insecure_channel(f"127.0.0.1:{self.d.port}",
                                   options=[("grpc.max_send_message_length", -1),
                                            ("grpc.max_receive_message_length", -1)])
        self.addCleanup(ch.close)
        return pbg.ReplayStub(ch)

    def size(self, w):
        return self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10).counters.size


class TestCompression(HardeningBase):
    extra = ("--max-message-bytes", "4M")

    def test_compressed_inserts_work(self):
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=10000), timeout=10)
        md = ((TOKEN_KEY, w.token),)
        s = self.stub()
        for i, alg in enumerate((grpc.Compression.Gzip, grpc.Compression.Deflate)):
            r = s.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(100, 100 * i)),
                              metadata=md, timeout=10, compression=alg)
            self.assertEqual(list(r.keys), list(range(100 * i, 100 * i + 100)))
        r = s.Insert(iter([pb.InsertRequest(workload_id=w.id, rows=rows(50, 200))] * 3),
                     metadata=md, timeout=10, compression=grpc.Compression.Gzip)
        self.assertEqual(r.inserted, 150)
        smp = s.Sample(pb.SampleRequest(workload_id=w.id, batch_size=64), metadata=md,
                       timeout=10, compression=grpc.Compression.Gzip)
        for i, k in enumerate(smp.keys):  # the rows came back as inserted
            got = struct.unpack_from("<f", smp.rows.columns[0], i * 16)[0]
            self.assertEqual(got, float(k if k < 200 else 200 + (k - 200) % 50))

    def test_bomb_refused_without_inflating_it(self):
        """512 MiB of zeros, about 500 KiB gzip'd, against a 4 MiB limit:
        refused, nothing inserted, and the daemon's memory does not grow by
        anything near what the message inflates to."""
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=1000), timeout=10)
        md = ((TOKEN_KEY, w.token),)
        s = self.stub()
        big = pb.RowBatch(count=1000, columns=[b"\0" * (512 << 20), b"", b"", b"", b""])
        req = pb.InsertRequest(workload_id=w.id, rows=big)
        before = rss_kib(self.d.proc.pid)
        for call in ("unary", "stream"):
            with self.assertRaises(grpc.RpcError) as cm:
                if call == "unary":
                    s.InsertBatch(req, metadata=md, timeout=60, compression=grpc.Compression.Gzip)
                else:
                    s.Insert(iter([req]), metadata=md, timeout=60,
                             compression=grpc.Compression.Gzip)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, call)
            self.assertIn("inflates to more than the message limit", cm.exception.details())
        del big, req
        grew = rss_kib(self.d.proc.pid) - before
        self.assertLess(grew, 64 << 10, f"RSS grew by {grew} KiB")
        self.assertEqual(self.size(w), 0)
        # Corrupt compressed data is a clear error too, not a crash: a raw
        # HTTP/2 client is not at hand, so the daemon is checked alive.
        self.assertTrue(self.d.alive())


class TestSlowCallsOffTheRequestThreads(HardeningBase):
    def test_unauthenticated_plans_are_refused_at_once(self):
        """12 concurrent Plans without a token: all UNAUTHENTICATED at once,
        nothing measured or stored."""
        results = []

        def plan(i):
            try:
                self.d.stub.Plan(pb.PlanRequest(spec=learner_spec((16 + i, 16))), timeout=30)
                results.append("OK")
            except grpc.RpcError as e:
                results.append(e.code())

        t0 = time.monotonic()
        threads = [threading.Thread(target=plan, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(results, [grpc.StatusCode.UNAUTHENTICATED] * 12)
        listed = self.d.stub.ListProfiles(pb.ListProfilesRequest(), metadata=self.admin(),
                                          timeout=10)
        self.assertEqual(len(listed.profiles), 0)

    def test_placement_storm_stalls_no_one(self):
        """Admin Plans with distinct shapes (each profiles for up to 1.5 s)
        and Registers, 24 at once: they are queued (at most 16 wait, the
        rest RESOURCE_EXHAUSTED at once), while Sample on another workload
        and ServerInfo answer promptly the whole time."""
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=10000), timeout=10)
        md = ((TOKEN_KEY, w.token),)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(1000)), metadata=md,
                                timeout=10)
        codes = []
        lock = threading.Lock()

        def slow(i):
            try:
                if i % 2:
                    self.d.stub.Plan(pb.PlanRequest(spec=learner_spec((8 + i, 8))),
                                     metadata=self.admin(), timeout=120)
                else:
                    self.d.stub.RegisterWorkload(learner_spec((8 + i, 9)), timeout=120)
                code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                code = e.code()
            with lock:
                codes.append(code)

        threads = [threading.Thread(target=slow, args=(i,)) for i in range(24)]
        for t in threads:
            t.start()
        worst = 0.0
        calls = 0
        while any(t.is_alive() for t in threads):
            t0 = time.monotonic()
            self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=256), metadata=md,
                               timeout=10)
            self.d.stub.ServerInfo(pb.ServerInfoRequest(), timeout=10)
            worst = max(worst, time.monotonic() - t0)
            calls += 1
        for t in threads:
            t.join()
        print(f"  {calls} Sample+ServerInfo pairs during the storm, worst {worst * 1e3:.1f} ms; "
              f"storm: {sorted(c.name for c in codes)}", flush=True)
        # The storm's calls only queue: without the queue a Sample waited
        # for every profile in line (seconds).
        self.assertLess(worst, 1.0)
        self.assertEqual(len(codes), 24)
        self.assertTrue(all(c in (grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED)
                            for c in codes), codes)
        self.assertGreaterEqual(codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED), 24 - 17)
        self.assertGreater(codes.count(grpc.StatusCode.OK), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
