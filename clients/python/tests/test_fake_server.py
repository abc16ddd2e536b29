"""Retries, deadlines and cancellation, against an in-process gRPC server
that answers the way a test needs (fails a given number of times, or
never answers): what the real daemon cannot be made to do on demand."""
import threading
import time
from concurrent import futures

import grpc
import numpy as np
import pytest

import replayd
from replayd._proto import replayd_pb2 as pb

SPEC = replayd.Spec(fields={"x": np.float32}, capacity=10)


class Fake:
    """Method name -> handler(request_bytes, context) -> reply message."""

    def __init__(self, handlers):
        self.calls = {}
        self.cancelled = 0
        self.lock = threading.Lock()
        fake = self

        class Generic(grpc.GenericRpcHandler):
            def service(self, details):
                name = details.method.rsplit("/", 1)[-1]
                if name not in handlers:
                    return None

                def unary(req, ctx):
                    with fake.lock:
                        fake.calls[name] = fake.calls.get(name, 0) + 1
                        n = fake.calls[name]
                    return handlers[name](req, ctx, n).SerializeToString()

                return grpc.unary_unary_rpc_method_handler(unary)

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                  handlers=[Generic()])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.address = f"127.0.0.1:{self.port}"

    def stop(self):
        self.server.stop(0)


def describe(req, ctx, n):
    return pb.Workload(id="w", spec=SPEC.to_proto())


def sample_reply(batch=2):
    return pb.SampleResponse(keys=list(range(batch)), probabilities=[0.5] * batch,
                             weights=[1.0] * batch, table_size=batch,
                             rows=pb.RowBatch(count=batch,
                                              columns=[np.zeros(batch, np.float32).tobytes()]))


@pytest.fixture
def fake_factory():
    made = []

    def make(handlers):
        f = Fake(handlers)
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()


def unavailable_then_ok(fails, reply):
    def h(req, ctx, n):
        if n <= fails:
            ctx.abort(grpc.StatusCode.UNAVAILABLE, f"restarting ({n})")
        return reply
    return h


def test_retry_safe_calls_are_retried_on_unavailable(fake_factory):
    f = fake_factory({"ServerInfo": unavailable_then_ok(2, pb.ServerInfoResponse(version="9")),
                      "DescribeWorkload": describe,
                      "Sample": unavailable_then_ok(1, sample_reply())})
    c = replayd.Client(f.address, retries=3, backoff=0.01)
    assert c.server_info().version == "9" and f.calls["ServerInfo"] == 3
    assert len(c.workload("w", "t").sample(2)) == 2 and f.calls["Sample"] == 2


def test_retries_run_out(fake_factory):
    f = fake_factory({"ServerInfo": unavailable_then_ok(10, pb.ServerInfoResponse())})
    c = replayd.Client(f.address, retries=2, backoff=0.01)
    with pytest.raises(replayd.Unavailable) as e:
        c.server_info()
    assert f.calls["ServerInfo"] == 3 and e.value.message == "restarting (3)"


def test_calls_that_could_repeat_an_effect_are_not_retried(fake_factory):
    f = fake_factory({
        "TrainStep": unavailable_then_ok(1, pb.TrainStepResponse(steps_done=1)),
        "InsertBatch": unavailable_then_ok(1, pb.InsertResponse(keys=[0], inserted=1)),
        "RegisterWorkload": unavailable_then_ok(1, pb.Workload(id="w", token="t",
                                                               spec=SPEC.to_proto())),
        "DescribeWorkload": describe})
    c = replayd.Client(f.address, retries=5, backoff=0.01)
    w = c.workload("w", "t")
    with pytest.raises(replayd.Unavailable):
        w.train_step(1)
    with pytest.raises(replayd.Unavailable):
        w.insert({"x": np.zeros(1, np.float32)})
    with pytest.raises(replayd.Unavailable):
        c.register(SPEC)
    assert f.calls == {"TrainStep": 1, "InsertBatch": 1, "RegisterWorkload": 1,
                       "DescribeWorkload": 1}
    # the second attempt, made by the caller, goes through
    assert w.train_step(1).steps_done == 1


def test_the_deadline_covers_the_retries(fake_factory):
    f = fake_factory({"ServerInfo": unavailable_then_ok(100, pb.ServerInfoResponse())})
    c = replayd.Client(f.address, retries=5, backoff=0.1)  # 3.1 s of backoff in all
    t0 = time.monotonic()
    with pytest.raises(replayd.Unavailable):
        c.server_info(timeout=0.5)
    assert time.monotonic() - t0 < 2.0  # without the deadline: 3.1 s of backoff
    assert 2 <= f.calls["ServerInfo"] <= 4


def test_default_and_per_call_deadlines(fake_factory):
    def slow(req, ctx, n):
        time.sleep(1.0)
        return pb.ServerInfoResponse()

    f = fake_factory({"ServerInfo": slow})
    c = replayd.Client(f.address, timeout=0.2)
    t0 = time.monotonic()
    with pytest.raises(replayd.DeadlineExceeded) as e:
        c.server_info()
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - t0 < 0.9
    assert c.server_info(timeout=3).version == ""  # the call's own deadline wins


def test_sampler_close_cancels_the_calls_in_flight(fake_factory):
    # Every Sample blocks until the client cancels it: which of the
    # sampler's calls reaches the server first is not fixed, so none is
    # answered (a test that answered "the first" raced on arrival order).
    started = threading.Semaphore(0)
    ended = []

    def sample(req, ctx, n):
        started.release()
        t0 = time.monotonic()
        while ctx.is_active() and time.monotonic() - t0 < 120:
            time.sleep(0.01)
        ended.append(ctx.is_active())  # False: the client cancelled
        return sample_reply()

    f = fake_factory({"Sample": sample, "DescribeWorkload": describe})
    c = replayd.Client(f.address, timeout=600)  # no deadline ends them first
    it = c.workload("w", "t").sampler(2, prefetch=3)
    for _ in range(3):  # three calls in flight
        assert started.acquire(timeout=30)
    # Generous bounds: a loaded CI machine can take seconds to schedule the
    # server's threads; the handlers wait far longer than any test run, so
    # only the client's cancel ends them.
    t0 = time.monotonic()
    it.close()
    while len(ended) < 3 and time.monotonic() - t0 < 60:
        time.sleep(0.01)
    assert ended == [False, False, False]
    assert f.calls["Sample"] == 3
    with pytest.raises(StopIteration):
        next(it)


def test_sampler_deadline(fake_factory):
    def never(req, ctx, n):
        time.sleep(2)
        return sample_reply()

    f = fake_factory({"Sample": never, "DescribeWorkload": describe})
    it = replayd.Client(f.address).workload("w", "t").sampler(2, prefetch=2, timeout=0.2)
    with pytest.raises(replayd.DeadlineExceeded):
        next(it)
    assert it.closed


def test_a_reply_that_is_not_protobuf(fake_factory):
    class Junk:
        def SerializeToString(self):
            return b"\x0a\xff\xff"  # a field longer than the message

    f = fake_factory({"Sample": lambda req, ctx, n: Junk(), "DescribeWorkload": describe})
    w = replayd.Client(f.address).workload("w", "t")
    with pytest.raises(replayd.Internal, match="could not be decoded: truncated"):
        w.sample(2)
    with pytest.raises(replayd.Internal, match="could not be decoded"):
        next(w.sampler(2))
