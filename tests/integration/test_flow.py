#!/usr/bin/python3
"""Flow control on the real daemon (issue 23): a table's rate limiter,
calls that wait for it (and how their waits end: the limiter lets them
through, their deadline passes, the client cancels, the workload is
deleted, the server drains, fail_fast), the bounds on waiting calls,
SetRateLimiter (stored across a restart), and SampleStream (window,
acknowledgements, priority updates, cancellation, a slow consumer).

usage: test_flow.py REPLAYD_EXE PROTO_DIR [REPLAYCTL_EXE]
"""
import json
import math
import queue
import signal
import subprocess
import sys
import threading
import time
import unittest

from test_daemon import Base, Daemon, pb, grpc, cartpole_spec, rows  # noqa: E402
from replayd_test import rss_kib  # noqa: E402

REPLAYCTL = sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else None

LONG = 30  # seconds: a deadline no test waits out


def limiter(**kw):
    return pb.RateLimiterSpec(**kw)


class Requests:
    """A SampleStream's client messages, fed from a queue."""

    def __init__(self, first):
        self.q = queue.Queue()
        self.q.put(first)

    def put(self, m):
        self.q.put(m)

    def close(self):
        self.q.put(None)

    def __iter__(self):
        while True:
            m = self.q.get()
            if m is None:
                return
            yield m


class FlowBase(Base):
    def register_limited(self, capacity=1000, **kw):
        return self.d.stub.RegisterWorkload(
            cartpole_spec(capacity=capacity, rate_limiter=limiter(**kw)), timeout=10)

    def insert(self, w, n, start=0, **kw):
        return self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(n, start),
                                                        **kw),
                                       metadata=self.md(w), timeout=kw.pop("timeout", 10))

    def sample_future(self, w, batch=8, timeout=LONG, **kw):
        return self.d.stub.Sample.future(
            pb.SampleRequest(workload_id=w.id, batch_size=batch, **kw), metadata=self.md(w),
            timeout=timeout)

    def lim(self, w):
        return self.describe(w).rate_limiter

    def wait_for(self, pred, what, timeout=60):
        t0 = time.monotonic()
        while not pred():
            self.assertLess(time.monotonic() - t0, timeout, "timed out waiting for " + what)
            time.sleep(0.01)

    def blocked_sample(self, w, what):
        """A Sample of 8 on w, once its rate limiter shows it waiting."""
        f = self.sample_future(w)
        self.wait_for(lambda: self.lim(w).blocked_samples == 1, what)
        return f

    def stream(self, w, batch=8, window=4, timeout=LONG, **kw):
        reqs = Requests(pb.SampleStreamRequest(workload_id=w.id, batch_size=batch,
                                               window=window, **kw))
        it = self.d.stub.SampleStream(iter(reqs), metadata=self.md(w), timeout=timeout)
        return reqs, it


class TestWaiting(FlowBase):
    def test_sample_waits_for_min_size(self):
        w = self.register_limited(min_size_to_sample=100)
        self.insert(w, 60)
        f = self.blocked_sample(w, "the sample to show as blocked")
        time.sleep(0.3)  # time waited, for sample_wait_seconds below
        self.assertFalse(f.done(), "a sample below min_size_to_sample must wait")
        self.insert(w, 40, 60)
        s = f.result(timeout=10)
        self.assertEqual(len(s.keys), 8)
        self.assertEqual(s.table_size, 100)
        st = self.lim(w)
        self.assertEqual((st.blocked_samples, st.sample_waits), (0, 1))
        self.assertGreater(st.sample_wait_seconds, 0.25)
        self.assertEqual((st.inserted, st.sampled), (100, 8))

    def test_deadline_and_fail_fast(self):
        w = self.register_limited(min_size_to_sample=10)
        t0 = time.monotonic()
        e = self.assert_code(grpc.StatusCode.DEADLINE_EXCEEDED, self.sample_future(
            w, timeout=0.5).result)
        self.assertLess(time.monotonic() - t0, 15)  # its deadline, not LONG
        self.wait_for(lambda: self.lim(w).blocked_samples == 0, "the expired wait to leave")
        e = self.assert_code(grpc.StatusCode.DEADLINE_EXCEEDED, self.d.stub.Sample,
                             pb.SampleRequest(workload_id=w.id, batch_size=4, fail_fast=True),
                             metadata=self.md(w), timeout=10)
        self.assertIn("rate limiter", e.details())
        self.assertIn("min_size_to_sample", e.details())
        self.assertEqual(self.describe(w).counters.samples, 0)

    def test_cancel_frees_the_wait(self):
        w = self.register_limited(min_size_to_sample=10)
        fs = [self.sample_future(w) for _ in range(3)]
        self.wait_for(lambda: self.lim(w).blocked_samples == 3, "three waits")
        fs[1].cancel()
        self.wait_for(lambda: self.lim(w).blocked_samples == 2, "the cancelled wait to leave")
        self.insert(w, 10)
        for f in (fs[0], fs[2]):
            self.assertEqual(len(f.result(timeout=10).keys), 8)
        self.assertEqual(self.lim(w).sampled, 16)

    def test_ratio_holds_inserts_and_samples(self):
        # samples_per_insert 1 around min size 10: diffs [10 - 20, 10 + 20].
        w = self.register_limited(min_size_to_sample=10, samples_per_insert=1.0,
                                  error_buffer=20.0)
        st = self.lim(w)
        self.assertEqual((st.spec.min_diff, st.spec.max_diff), (-10.0, 30.0))
        self.assertFalse(st.spec.HasField("error_buffer"))
        self.insert(w, 10)  # below min size: free
        self.insert(w, 20)  # 30 x 1 - 0 = 30 <= max_diff
        e = self.assert_code(grpc.StatusCode.DEADLINE_EXCEEDED, self.insert, w, 1,
                             fail_fast=True)
        self.assertIn("max_diff", e.details())
        blocked = self.d.stub.InsertBatch.future(
            pb.InsertRequest(workload_id=w.id, rows=rows(5, 30)), metadata=self.md(w),
            timeout=LONG)
        self.wait_for(lambda: self.lim(w).blocked_inserts == 1, "the insert to wait")
        s = self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=5),
                               metadata=self.md(w), timeout=10)
        self.assertEqual(len(s.keys), 5)  # 30 - 5 = 25: the insert of 5 fits (35 - 5 = 30)
        self.assertEqual(list(blocked.result(timeout=10).keys), [30, 31, 32, 33, 34])
        st = self.lim(w)
        self.assertEqual((st.inserted, st.sampled, st.insert_waits), (35, 5, 1))
        self.assertAlmostEqual(st.ratio, 5 / 35)
        # Samples stop at min_diff: from 35 - 35 = 0, n <= 10 more.
        self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=30, fail_fast=True),
                           metadata=self.md(w), timeout=10)
        e = self.assert_code(grpc.StatusCode.DEADLINE_EXCEEDED, self.d.stub.Sample,
                             pb.SampleRequest(workload_id=w.id, batch_size=11, fail_fast=True),
                             metadata=self.md(w), timeout=10)
        self.assertIn("min_diff", e.details())
        self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=10, fail_fast=True),
                           metadata=self.md(w), timeout=10)

    def test_insert_stream_waits(self):
        w = self.register_limited(min_size_to_sample=1, samples_per_insert=1.0, max_diff=20.0)
        go = threading.Event()

        def gen():
            for i in range(4):  # the third message waits for samples
                yield pb.InsertRequest(workload_id=w.id, rows=rows(10, 10 * i))
            go.wait(LONG)

        f = self.d.stub.Insert.future(gen(), metadata=self.md(w), timeout=LONG)
        self.wait_for(lambda: self.lim(w).blocked_inserts == 1, "the stream to wait")
        self.assertEqual(self.describe(w).counters.inserts, 20)
        self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=20),
                           metadata=self.md(w), timeout=10)
        self.wait_for(lambda: self.describe(w).counters.inserts == 40, "the rest to go in")
        go.set()
        self.assertEqual(f.result(timeout=10).inserted, 40)

    def test_delete_ends_waits(self):
        w = self.register_limited(min_size_to_sample=10)
        f = self.sample_future(w)
        reqs, it = self.stream(w)
        self.wait_for(lambda: self.lim(w).blocked_samples == 2, "two waits")
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=self.md(w), timeout=10)
        e = self.assert_code(grpc.StatusCode.NOT_FOUND, f.result, timeout=10)
        self.assertIn(w.id, e.details())
        with self.assertRaises(grpc.RpcError) as cm:
            next(it)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        reqs.close()


class TestBounds(FlowBase):
    extra = ("--max-waiting-per-workload", "3", "--max-waiting-calls", "4")

    def test_bounds_on_waiting_calls(self):
        a = self.register_limited(min_size_to_sample=10)
        b = self.register_limited(min_size_to_sample=10)
        fa = [self.sample_future(a) for _ in range(2)]
        reqs, it = self.stream(a)  # a stream holds a slot for its life
        self.wait_for(lambda: self.lim(a).blocked_samples == 3, "a's three waits")
        e = self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.sample_future(a).result,
                             timeout=10)
        self.assertIn("--max-waiting-per-workload", e.details())
        fb = self.sample_future(b)
        self.wait_for(lambda: self.lim(b).blocked_samples == 1, "b's wait")
        e = self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.sample_future(b).result,
                             timeout=10)
        self.assertIn("--max-waiting-calls", e.details())
        # Waiting calls that end give their slots back.
        fa[0].cancel()
        reqs.close()
        self.wait_for(lambda: self.lim(a).blocked_samples == 1, "a's waits to leave")
        fb2 = self.sample_future(b)
        self.wait_for(lambda: self.lim(b).blocked_samples == 2, "b's second wait")
        self.insert(b, 10)
        for f in (fb, fb2):
            self.assertEqual(len(f.result(timeout=10).keys), 8)
        self.insert(a, 10)
        self.assertEqual(len(fa[1].result(timeout=10).keys), 8)


class TestParkedBytes(FlowBase):
    extra = ("--max-message-bytes", "4096")  # parked requests: at most 16 KiB in all

    def test_parked_requests_are_bounded_in_bytes(self):
        w = self.register_limited(min_size_to_sample=1, samples_per_insert=1.0, max_diff=0.0)
        fs = [self.d.stub.InsertBatch.future(pb.InsertRequest(workload_id=w.id,
                                                              rows=rows(60, 60 * i)),
                                             metadata=self.md(w), timeout=LONG)
              for i in range(8)]  # each about 2.6 KB: six fit
        # Six park; two are refused at once (whichever arrive last).
        self.wait_for(lambda: self.lim(w).blocked_inserts == 6 and
                      sum(f.done() for f in fs) == 2, "six parked and two refused")
        for f in fs:
            if f.done():
                e = f.exception()
                self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
                self.assertIn("bytes of requests", e.details())
        self.d.stub.SetRateLimiter(pb.SetRateLimiterRequest(workload_id=w.id),
                                   metadata=self.md(w), timeout=10)
        done = [f for f in fs if f.exception(timeout=LONG) is None]
        self.assertEqual(len(done), 6)
        self.assertEqual(self.describe(w).counters.inserts, 360)


class TestSetRateLimiter(FlowBase):
    def test_change_store_and_remove(self):
        w = self.register_limited(min_size_to_sample=50)
        self.insert(w, 10)
        f = self.blocked_sample(w, "the wait")
        r = self.d.stub.SetRateLimiter(pb.SetRateLimiterRequest(
            workload_id=w.id, rate_limiter=limiter(min_size_to_sample=5, samples_per_insert=2.0,
                                                   error_buffer=100.0)),
            metadata=self.md(w), timeout=10)
        self.assertEqual(r.rate_limiter.spec.min_diff, 2 * 5 - 100.0)
        self.assertEqual(r.spec.rate_limiter.max_diff, 2 * 5 + 100.0)
        self.assertEqual(len(f.result(timeout=10).keys), 8)  # the new limits let it through
        # Bad limiters change nothing.
        for bad in (limiter(samples_per_insert=-1.0), limiter(samples_per_insert=1.0),
                    limiter(min_size_to_sample=5000),
                    limiter(samples_per_insert=1.0, min_diff=5.0, max_diff=1.0)):
            self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.d.stub.SetRateLimiter,
                             pb.SetRateLimiterRequest(workload_id=w.id, rate_limiter=bad),
                             metadata=self.md(w), timeout=10)
        self.assertEqual(self.lim(w).spec.samples_per_insert, 2.0)
        # The owner's call only.
        other = self.register()
        self.assert_code(grpc.StatusCode.PERMISSION_DENIED, self.d.stub.SetRateLimiter,
                         pb.SetRateLimiterRequest(workload_id=w.id), metadata=self.md(other),
                         timeout=10)
        # Kept across a restart, with the table (the shutdown's checkpoint)
        # and the limiter's counts at that checkpoint (I = 10, S = 8).
        self.assertEqual(self.d.stop(), 0)
        self.d = Daemon(self.state)
        st = self.lim(w)
        self.assertEqual((st.spec.min_size_to_sample, st.spec.samples_per_insert),
                         (5, 2.0))
        self.assertEqual((st.inserted, st.sampled), (10, 8))
        self.assertEqual(self.describe(w).counters.size, 10)
        # None: a waiting call runs at once.
        self.d.stub.SetRateLimiter(pb.SetRateLimiterRequest(
            workload_id=w.id, rate_limiter=limiter(min_size_to_sample=50)),
            metadata=self.md(w), timeout=10)
        f = self.blocked_sample(w, "the wait after restart")
        r = self.d.stub.SetRateLimiter(pb.SetRateLimiterRequest(workload_id=w.id),
                                       metadata=self.md(w), timeout=10)
        self.assertFalse(r.HasField("rate_limiter"))
        self.assertEqual(len(f.result(timeout=10).keys), 8)
        self.assertFalse(self.describe(w).spec.HasField("rate_limiter"))

    def test_continuous_learner_shares_the_limiter(self):
        spec = cartpole_spec(capacity=4096)
        spec.learner.CopyFrom(pb.LearnerSpec(algorithm="dqn", hidden=[16], batch_size=16,
                                             num_actions=2, samples_per_insert=4.0,
                                             min_size=64))
        w = self.d.stub.RegisterWorkload(spec, timeout=30)
        st = self.lim(w)  # derived from the learner: S <= 4 I from 64 items on
        self.assertEqual((st.spec.min_size_to_sample, st.spec.samples_per_insert,
                          st.spec.min_diff), (64, 4.0, 0.0))
        self.assertEqual(st.spec.max_diff, math.inf)
        self.insert(w, 100)
        self.wait_for(lambda: self.lim(w).sampled == 400, "the learner to use the ratio")
        # A remote sampler finds it used up: one ratio for both.
        self.assert_code(grpc.StatusCode.DEADLINE_EXCEEDED, self.d.stub.Sample,
                         pb.SampleRequest(workload_id=w.id, batch_size=1, fail_fast=True),
                         metadata=self.md(w), timeout=10)
        self.assert_code(grpc.StatusCode.FAILED_PRECONDITION, self.d.stub.SetRateLimiter,
                         pb.SetRateLimiterRequest(workload_id=w.id), metadata=self.md(w),
                         timeout=10)
        # A new ratio: the learner follows it.
        self.d.stub.SetRateLimiter(pb.SetRateLimiterRequest(
            workload_id=w.id, rate_limiter=limiter(min_size_to_sample=64, samples_per_insert=8.0,
                                                   min_diff=0.0)),
            metadata=self.md(w), timeout=10)
        self.assertEqual(self.describe(w).spec.learner.samples_per_insert, 8.0)
        self.wait_for(lambda: self.lim(w).sampled == 800, "the learner at the new ratio")
        # Both in a spec must agree.
        spec.rate_limiter.CopyFrom(limiter(samples_per_insert=2.0, error_buffer=10.0))
        e = self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.d.stub.RegisterWorkload,
                             spec, timeout=30)
        self.assertIn("differ", e.details())


class TestSampleStream(FlowBase):
    def test_window_acks_and_updates(self):
        w = self.register(capacity=1000)
        self.insert(w, 100)
        reqs, it = self.stream(w, batch=16, window=3, beta=0.5)
        got = [next(it) for _ in range(3)]
        self.assertTrue(all(len(b.keys) == 16 and b.rows.count == 16 for b in got))
        self.assertTrue(all(abs(max(b.weights) - 1.0) < 1e-12 for b in got))
        time.sleep(0.3)
        self.assertEqual(self.describe(w).counters.samples, 48, "no more than the window")
        reqs.put(pb.SampleStreamRequest(ack=2, keys=list(got[0].keys),
                                        priorities=[5.0] * 16))
        got += [next(it) for _ in range(2)]
        # The update was applied before the batches its ack let through.
        dsc = self.describe(w)
        self.assertEqual((dsc.counters.samples, dsc.counters.updates), (80, 16))
        # A bad message ends the stream with its status; earlier ones stay.
        reqs.put(pb.SampleStreamRequest(ack=1, keys=[1], priorities=[math.nan]))
        with self.assertRaises(grpc.RpcError) as cm:
            for _ in it:
                pass
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        reqs.close()

    def test_half_close_ends_ok(self):
        w = self.register(capacity=1000)
        self.insert(w, 100)
        reqs, it = self.stream(w, batch=4, window=2)
        next(it)
        reqs.close()
        rest = list(it)
        self.assertLessEqual(len(rest), 1)

    def test_bad_opens(self):
        w = self.register(capacity=1000)
        for kw, code in ((dict(batch=0), grpc.StatusCode.INVALID_ARGUMENT),
                         (dict(window=65), grpc.StatusCode.INVALID_ARGUMENT),
                         (dict(batch=65536, window=64), grpc.StatusCode.RESOURCE_EXHAUSTED)):
            reqs, it = self.stream(w, **kw)
            with self.assertRaises(grpc.RpcError) as cm:
                next(it)
            self.assertEqual(cm.exception.code(), code, cm.exception.details())
            reqs.close()
        reqs = Requests(pb.SampleStreamRequest(workload_id=w.id, batch_size=4))
        it = self.d.stub.SampleStream(iter(reqs), metadata=(), timeout=10)
        with self.assertRaises(grpc.RpcError) as cm:
            next(it)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        reqs.close()

    def test_stream_waits_for_the_limiter_and_cancels(self):
        w = self.register_limited(min_size_to_sample=20)
        reqs, it = self.stream(w, batch=8, window=4)
        self.wait_for(lambda: self.lim(w).blocked_samples == 1, "the stream to wait")
        self.insert(w, 20)
        self.assertEqual(len(next(it).keys), 8)
        self.assertLessEqual(self.lim(w).sampled, 32)  # the window, no more
        it.cancel()
        reqs.close()
        # Cancelled while its batch waits in the limiter: the wait goes too.
        w2 = self.register_limited(min_size_to_sample=20)
        reqs, it = self.stream(w2, batch=8, window=4)
        self.wait_for(lambda: self.lim(w2).blocked_samples == 1, "the second stream to wait")
        it.cancel()
        reqs.close()
        self.wait_for(lambda: self.lim(w2).blocked_samples == 0, "the cancelled wait to leave")
        self.assertEqual(self.lim(w2).sampled, 0)

    def test_slow_consumer_holds_the_window_only(self):
        # 4 KiB rows: a batch of 256 is a 1 MiB message.
        spec = pb.WorkloadSpec(name="big", capacity=512, seed=1, fields=[
            pb.Field(name="x", dtype=pb.UINT8, shape=[4096])])
        w = self.d.stub.RegisterWorkload(spec, timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=pb.RowBatch(
            count=512, columns=[bytes(512 * 4096)])), metadata=self.md(w), timeout=10)
        rss0 = rss_kib(self.d.proc.pid)
        reqs, it = self.stream(w, batch=256, window=8)
        next(it)  # then read nothing more
        # How many of the window the server gets out depends on how much
        # the transport buffers (gRPC's flow-control window, timing): at
        # least the one read, never more than the window.
        self.wait_for(lambda: self.describe(w).counters.samples >= 256, "the first batch")
        time.sleep(1.5)  # time to go past the window, were it not a bound
        samples = self.describe(w).counters.samples
        self.assertLessEqual(samples, 8 * 256, "the server samples the window and stops")
        grew = rss_kib(self.d.proc.pid) - rss0
        self.assertLess(grew, 8 * 1024 + 16 * 1024, f"daemon grew {grew} KiB")
        it.cancel()
        reqs.close()


@unittest.skipIf(REPLAYCTL is None, "no replayctl given")
class TestReplayctl(FlowBase):
    def test_describe_shows_the_limiter(self):
        w = self.register_limited(min_size_to_sample=20, samples_per_insert=2.0,
                                  error_buffer=10.0)
        self.insert(w, 20)
        # 26 x 2 - 0 > max_diff 50: the insert of 6 waits.
        f = self.d.stub.InsertBatch.future(pb.InsertRequest(workload_id=w.id, rows=rows(6)),
                                           metadata=self.md(w), timeout=LONG)
        self.wait_for(lambda: self.lim(w).blocked_inserts == 1, "the insert to wait")
        srv = f"127.0.0.1:{self.d.port}"
        out = subprocess.run([REPLAYCTL, "--server", srv, "describe", w.id],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("rate limiter", out.stdout)
        self.assertIn("2 samples per insert; inserted x ratio - sampled within [30, 50]",
                      out.stdout)
        self.assertIn("0 sampled / 20 inserted", out.stdout)
        self.assertIn("1 inserts, 0 samples waiting", out.stdout)
        js = subprocess.run([REPLAYCTL, "--server", srv, "--json", "describe", w.id],
                            capture_output=True, text=True, timeout=30)
        rl = json.loads(js.stdout)["rate_limiter"]
        self.assertEqual((rl["min_diff"], rl["max_diff"], rl["blocked_inserts"]), (30, 50, 1))
        self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=10),
                           metadata=self.md(w), timeout=10)
        f.result(timeout=10)
        plain = self.register()
        js = subprocess.run([REPLAYCTL, "--server", srv, "--json", "describe", plain.id],
                            capture_output=True, text=True, timeout=30)
        self.assertIsNone(json.loads(js.stdout)["rate_limiter"])


class TestStreamSlot(FlowBase):
    extra = ("--max-waiting-per-workload", "1")

    def test_cancel_mid_stream_frees_its_slot(self):
        w = self.register(capacity=1000)
        self.insert(w, 100)
        reqs, it = self.stream(w, batch=8, window=2)
        next(it)
        reqs2, it2 = self.stream(w, batch=8, window=2)  # the one slot is taken
        with self.assertRaises(grpc.RpcError) as cm:
            next(it2)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        reqs2.close()
        it.cancel()
        reqs.close()
        # The server sees the cancel soon; then a new stream opens.
        t_end = time.monotonic() + 60
        while True:
            reqs3, it3 = self.stream(w, batch=8, window=2)
            try:
                self.assertEqual(len(next(it3).keys), 8)
                break
            except grpc.RpcError as e:
                self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
                self.assertLess(time.monotonic(), t_end, "the cancelled stream kept its slot")
                time.sleep(0.05)
            finally:
                reqs3.close()
        it3.cancel()


class TestDrain(FlowBase):
    GRACE_S = 12  # a drain that waited for it would take longer than GRACE_S / 2
    extra = ("--shutdown-grace-ms", str(GRACE_S * 1000))

    def test_sigterm_ends_waits_and_streams_at_once(self):
        for rep in range(5):
            w = self.register_limited(min_size_to_sample=10)
            f = self.sample_future(w)
            ins = self.register_limited(min_size_to_sample=1, samples_per_insert=1.0,
                                        max_diff=5.0)
            self.insert(ins, 5)
            fi = self.d.stub.InsertBatch.future(pb.InsertRequest(workload_id=ins.id,
                                                                 rows=rows(5)),
                                                metadata=self.md(ins), timeout=LONG)
            open_w = self.register(capacity=100)
            self.insert(open_w, 50)
            reqs, it = self.stream(open_w, batch=4, window=2)
            next(it)
            self.wait_for(lambda: self.lim(w).blocked_samples == 1 and
                          self.lim(ins).blocked_inserts == 1, "the waits")
            t0 = time.monotonic()
            self.d.proc.send_signal(signal.SIGTERM)
            for fut in (f, fi):
                with self.assertRaises(grpc.RpcError) as cm:
                    fut.result(timeout=10)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
            with self.assertRaises(grpc.RpcError) as cm:
                for _ in it:
                    pass
            self.assertIn(cm.exception.code(), (grpc.StatusCode.UNAVAILABLE,
                                                grpc.StatusCode.CANCELLED))
            reqs.close()
            self.assertEqual(self.d.proc.wait(10), 0)
            self.assertLess(time.monotonic() - t0, self.GRACE_S / 2,
                            "the drain waited for the grace period")
            self.d.stop()
            self.d = Daemon(self.state, *self.extra)


if __name__ == "__main__":
    unittest.main(verbosity=2)
