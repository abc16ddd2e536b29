#!/usr/bin/python3
"""Sampled keys as fixed-width bytes (SampleRequest.keys_fixed64 ->
SampleResponse.keys_le) on the real daemon: the same keys as the packed
varints a request without the flag gets, read back by the generated
protobuf class; the stream's batches alike; and the flag changes nothing
else, errors included.

Two workloads of the same spec (the same seed) fed the same rows sample the
same keys, so one asks with the flag and the other without.

usage: test_keys_le.py REPLAYD_EXE PROTO_DIR
"""
import unittest

import numpy as np

from test_daemon import Base, pb, grpc, rows  # noqa: E402
from test_flow import Requests  # noqa: E402


def keys_of_le(raw):
    assert len(raw) % 8 == 0
    return np.frombuffer(raw, dtype="<u8").tolist()


class TestKeysLe(Base):
    def twins(self, n=3000, capacity=2000):
        ws = [self.register(capacity=capacity) for _ in range(2)]
        for w in ws:
            for start in range(0, n, 500):
                self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(500, start)),
                                        metadata=self.md(w), timeout=10)
        return ws

    def sample(self, w, **kw):
        return self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, **kw),
                                  metadata=self.md(w), timeout=10)

    def assert_same_but_keys(self, plain, fixed, n):
        self.assertEqual(len(plain.keys), n)
        self.assertEqual(len(fixed.keys), 0)  # the varints are not sent as well
        self.assertEqual(len(fixed.keys_le), 8 * n)
        self.assertEqual(keys_of_le(fixed.keys_le), list(plain.keys))
        self.assertEqual(len(plain.keys_le), 0)
        self.assertEqual(list(fixed.probabilities), list(plain.probabilities))
        self.assertEqual(list(fixed.weights), list(plain.weights))
        self.assertEqual(fixed.table_size, plain.table_size)
        self.assertEqual(fixed.rows, plain.rows)

    def test_unary_same_keys(self):
        a, b = self.twins()
        for batch, kw in ((512, {}), (1, {}), (333, {"stratified": True}), (64, {"beta": 0.9})):
            plain = self.sample(a, batch_size=batch, **kw)
            fixed = self.sample(b, batch_size=batch, keys_fixed64=True, **kw)
            self.assert_same_but_keys(plain, fixed, batch)
        # Keys past 2^7 and 2^14 (several varint lengths) were among them.
        self.assertGreater(max(plain.keys), 1 << 7)

    def test_keys_le_keys_update_priorities(self):
        _, b = self.twins(n=500, capacity=500)
        fixed = self.sample(b, batch_size=16, keys_fixed64=True)
        keys = keys_of_le(fixed.keys_le)
        r = self.d.stub.UpdatePriorities(
            pb.UpdatePrioritiesRequest(workload_id=b.id, keys=keys, priorities=[2.0] * 16),
            metadata=self.md(b), timeout=10)
        self.assertEqual(r.applied + r.stale, 16)
        self.assertEqual(r.stale, 0)

    def first_batches(self, w, count, **kw):
        reqs = Requests(pb.SampleStreamRequest(workload_id=w.id, batch_size=64, window=count,
                                               **kw))
        it = self.d.stub.SampleStream(iter(reqs), metadata=self.md(w), timeout=30)
        try:
            return [next(it) for _ in range(count)]
        finally:
            reqs.close()
            it.cancel()

    def test_stream_same_keys(self):
        a, b = self.twins()
        plain = self.first_batches(a, 3)
        fixed = self.first_batches(b, 3, keys_fixed64=True)
        for p, f in zip(plain, fixed):
            self.assert_same_but_keys(p, f, 64)

    def test_errors_unchanged(self):
        """The flag on a request that fails fails it the same way."""
        w = self.register(capacity=100)
        for kw in ({"batch_size": 8}, {"batch_size": 0}, {"batch_size": 1 << 30}):
            codes = []
            for flag in (False, True):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.sample(w, keys_fixed64=flag, fail_fast=True, **kw)
                codes.append(cm.exception.code())
            self.assertEqual(codes[0], codes[1], kw)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(10)),
                                metadata=self.md(w), timeout=10)
        for kw in ({"batch_size": 0}, {"batch_size": 1 << 30}):
            codes = []
            for flag in (False, True):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.sample(w, keys_fixed64=flag, **kw)
                codes.append(cm.exception.code())
            self.assertEqual(codes[0], codes[1], kw)


if __name__ == "__main__":
    unittest.main(verbosity=2)
