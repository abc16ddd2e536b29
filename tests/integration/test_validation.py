#!/usr/bin/python3
"""Input validation against the real replayd (issue 20 items 4-6): bool
columns hold 0 or 1; a string with a NUL byte, invalid UTF-8 or over 64 KiB
is refused by every RPC, naming the field, instead of being cut at the NUL;
profile latencies outside [1e-9, 3600] s and Plans whose figures would not
be finite are refused instead of answered with inf. Every refusal is
INVALID_ARGUMENT and changes nothing.

usage: test_validation.py REPLAYD_EXE PROTO_DIR FPGA_PARTS_DIR
"""
import json
import math
import os
import struct
import sys
import unittest

PARTS = os.path.abspath(sys.argv[3])
del sys.argv[3:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import DaemonCase, cartpole_spec, dqn_spec, grpc, pb, rows  # noqa: E402

INVALID = grpc.StatusCode.INVALID_ARGUMENT
DONE = 4  # the column of cartpole_spec's bool field "done"
SVC = "/replayd.v1.Replay/"


def learner_spec(name="plan", batch=32):
    """A DQN spec (a Plan maps a hosted learner)."""
    return dqn_spec(name=name, batch=batch)


def named(name):
    spec = cartpole_spec()
    spec.name = name
    return spec


def ld(field, payload):
    """A length-delimited field on the wire (short payloads)."""
    assert len(payload) < 128
    return bytes([field << 3 | 2, len(payload)]) + payload


class Base(DaemonCase):
    extra = ("--fpga-parts-dir", PARTS)

    def refused(self, fn, *a, says=(), **kw):
        """fn(*a, **kw) must fail INVALID_ARGUMENT with every text of says."""
        with self.assertRaises(grpc.RpcError) as cm:
            fn(*a, **kw)
        e = cm.exception
        self.assertEqual(e.code(), INVALID, e.details())
        for text in (says,) if isinstance(says, str) else says:
            self.assertIn(text, e.details())
        return e

    def raw(self, method, response):
        """A unary call that sends bytes as they are."""
        return self.d.channel.unary_unary(SVC + method, request_serializer=lambda b: b,
                                          response_deserializer=response.FromString)

    def counters(self, w):
        return self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10).counters

    def profile_count(self):
        return len(self.d.stub.ListProfiles(pb.ListProfilesRequest(), metadata=self.admin(),
                                            timeout=10).profiles)


class TestBoolColumns(Base):
    """Item 4: a bool byte other than 0 or 1 is refused on every insert path,
    before anything changes, naming the field and the first bad row."""

    def bad_rows(self, n, at, byte, start=0):
        b = rows(n, start)
        done = bytearray(b.columns[DONE])
        done[at] = byte
        b.columns[DONE] = bytes(done)
        return b

    def test_insert_batch(self):
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=100), timeout=10)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(10)),
                                metadata=self.md(w), timeout=10)
        before = self.counters(w)
        for byte in (2, 0xFF):
            for at in (0, 6, 11):
                self.refused(self.d.stub.InsertBatch,
                             pb.InsertRequest(workload_id=w.id, rows=self.bad_rows(12, at, byte)),
                             metadata=self.md(w), timeout=10,
                             says=('field "done"', f"row {at} holds 0x{byte:02x}",
                                   "a bool is 0 or 1"))
        after = self.counters(w)
        self.assertEqual((after.inserts, after.size), (before.inserts, before.size))
        # What is stored and sampled back is 0 or 1 only.
        s = self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=10),
                               metadata=self.md(w), timeout=10)
        self.assertTrue(set(s.rows.columns[DONE]) <= {0, 1})
        # 0 and 1 still go in.
        ok = rows(4)
        ok.columns[DONE] = bytes([0, 1, 1, 0])
        r = self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=ok),
                                    metadata=self.md(w), timeout=10)
        self.assertEqual(r.inserted, 4)

    def test_insert_stream(self):
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=100), timeout=10)
        for byte in (2, 0xFF):
            before = self.counters(w)

            def gen():
                yield pb.InsertRequest(workload_id=w.id, rows=rows(5))
                yield pb.InsertRequest(workload_id=w.id, rows=self.bad_rows(5, 3, byte, 5))
                yield pb.InsertRequest(workload_id=w.id, rows=rows(5, 10))

            self.refused(self.d.stub.Insert, gen(), metadata=self.md(w), timeout=10,
                         says=('field "done"', f"row 3 holds 0x{byte:02x}"))
            # The stream's first message stays (handlers.h: each message is
            # a batch); the bad one and what follows do not.
            after = self.counters(w)
            self.assertEqual(after.inserts, before.inserts + 5)
            self.assertEqual(after.size, before.size + 5)


class TestStrings(Base):
    """Item 5: a string with a NUL byte is refused by every RPC, naming the
    field, instead of being cut at the NUL; so is invalid UTF-8 and a string
    over 64 KiB."""

    def test_register(self):
        nul_field = cartpole_spec()
        nul_field.fields[1].name = "a\0b"
        self.refused(self.d.stub.RegisterWorkload, nul_field, timeout=10,
                     says="fields[1].name contains a NUL byte")
        # The name: a NUL and control characters behind it.
        for name in ("a\0b", "a\0b\x1b[31m\n"):
            self.refused(self.d.stub.RegisterWorkload, named(name), timeout=10,
                         says="name contains a NUL byte")
        spec = learner_spec()
        spec.learner.algorithm = "dqn\0x"
        self.refused(self.d.stub.RegisterWorkload, spec, timeout=10,
                     says="learner.algorithm contains a NUL byte")
        spec = learner_spec()
        spec.learner.activation = "tanh\0"
        self.refused(self.d.stub.RegisterWorkload, spec, timeout=10,
                     says="learner.activation contains a NUL byte")
        # Control characters without a NUL are the registry's to refuse, as
        # before; UTF-8 text is a name.
        self.refused(self.d.stub.RegisterWorkload, named("a\x1b[31m"), timeout=10)
        self.assertEqual(self.workload_count(), 0)
        w = self.d.stub.RegisterWorkload(named("caf\u00e9 \u65e5\u672c"),
                                         timeout=10)
        self.assertEqual(w.spec.name, "caf\u00e9 \u65e5\u672c")
        self.assertEqual(self.workload_count(), 1)

    def test_register_raw_bytes(self):
        """What a Python string cannot hold: invalid UTF-8, by hand."""
        call = self.raw("RegisterWorkload", pb.Workload)
        good = cartpole_spec().SerializeToString()
        self.refused(call, good + ld(1, b"ok\xc3\x28"), timeout=10,
                     says="name is not valid UTF-8")
        self.refused(call, good + ld(2, ld(1, b"\xed\xa0\x80")), timeout=10,
                     says="fields[5].name is not valid UTF-8")  # a surrogate
        long_name = named("x" * (64 * 1024 + 1)).SerializeToString()
        self.refused(call, long_name, timeout=10,
                     says="name is 65537 bytes; a string may have at most 65536")
        self.assertEqual(self.workload_count(), 0)

    def test_plan(self):
        admin = self.admin()
        n = self.profile_count()
        spec = learner_spec()
        spec.fields[3].name = "next\0obs"
        self.refused(self.d.stub.Plan, pb.PlanRequest(spec=spec), metadata=admin, timeout=10,
                     says="spec.fields[3].name contains a NUL byte")
        spec = learner_spec(name="a\0b\x1b[31m\n")
        self.refused(self.d.stub.Plan, pb.PlanRequest(spec=spec), metadata=admin, timeout=10,
                     says="spec.name contains a NUL byte")
        for part in ("u250\0x", "u250\0\x1b[31m\n"):
            self.refused(self.d.stub.Plan, pb.PlanRequest(spec=learner_spec(), fpga_part=part),
                         metadata=admin, timeout=10, says="fpga_part contains a NUL byte")
        call = self.raw("Plan", pb.PlanResponse)
        body = pb.PlanRequest(spec=learner_spec()).SerializeToString() + ld(3, b"u25\xff")
        self.refused(call, body, metadata=admin, timeout=10, says="fpga_part is not valid UTF-8")
        # Nothing was measured or stored for any of them.
        self.assertEqual(self.profile_count(), n)
        self.assertEqual(self.workload_count(), 0)

    def test_workload_id_on_every_rpc(self):
        """A token for workload X with workload_id "X\\0junk" used to open X."""
        w = self.d.stub.RegisterWorkload(learner_spec(name="target"), timeout=30)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=self.learner_rows(64)),
                                metadata=self.md(w), timeout=10)
        before = self.counters(w)
        bad = w.id + "\0junk"
        says = "contains a NUL byte"
        md = self.md(w)
        s = self.d.stub
        self.refused(s.DescribeWorkload, pb.WorkloadRef(id=bad), timeout=10, says="id " + says)
        self.refused(s.DeleteWorkload, pb.WorkloadRef(id=bad), metadata=md, timeout=10,
                     says="id " + says)
        self.refused(s.InsertBatch, pb.InsertRequest(workload_id=bad, rows=self.learner_rows(4)),
                     metadata=md, timeout=10, says="workload_id " + says)
        self.refused(s.Insert, iter([pb.InsertRequest(workload_id=bad,
                                                      rows=self.learner_rows(4))]),
                     metadata=md, timeout=10, says="workload_id " + says)
        # A stream whose later message names the workload with a NUL.
        self.refused(s.Insert, iter([pb.InsertRequest(workload_id=w.id,
                                                      rows=self.learner_rows(4)),
                                     pb.InsertRequest(workload_id=bad,
                                                      rows=self.learner_rows(4))]),
                     metadata=md, timeout=10, says="workload_id " + says)
        self.refused(s.Sample, pb.SampleRequest(workload_id=bad, batch_size=4), metadata=md,
                     timeout=10, says="workload_id " + says)
        self.refused(s.UpdatePriorities,
                     pb.UpdatePrioritiesRequest(workload_id=bad, keys=[0], priorities=[1.0]),
                     metadata=md, timeout=10, says="workload_id " + says)
        self.refused(s.TrainStep, pb.TrainStepRequest(workload_id=bad, steps=1), metadata=md,
                     timeout=10, says="workload_id " + says)
        self.refused(s.GetWeights, pb.GetWeightsRequest(workload_id=bad), metadata=md,
                     timeout=10, says="workload_id " + says)
        after = self.counters(w)
        self.assertEqual(after.inserts, before.inserts + 4)  # the stream's first message
        self.assertEqual((after.samples, after.updates), (before.samples, before.updates))
        self.assertEqual(self.workload_count(), 1)  # not deleted
        # Invalid UTF-8 in an id, by hand.
        self.refused(self.raw("DescribeWorkload", pb.Workload), ld(1, b"\xc3"), timeout=10,
                     says="id is not valid UTF-8")

    @staticmethod
    def learner_rows(n):
        obs = b"".join(struct.pack("<4f", i, 0, 0, 0) for i in range(n))
        act = b"".join(struct.pack("<i", i % 2) for i in range(n))
        rew = struct.pack(f"<{n}f", *([1.0] * n))
        disc = struct.pack(f"<{n}f", *([0.99] * n))
        return pb.RowBatch(count=n, columns=[obs, act, rew, obs, disc])


class TestFiniteFigures(Base):
    """Item 6: latencies outside [1e-9, 3600] s are refused where profiles
    come in (ImportProfiles, Plan's gpu_profiles); a Plan never answers OK
    with a figure that is not a finite number."""

    def gpu_rows(self, spec, latency):
        """This CPU's stored rows for spec's shape, relabelled as a GPU's with
        latency(old) as their latencies (test_dse.py does the same)."""
        exp = self.d.stub.ExportProfiles(pb.ExportProfilesRequest(), metadata=self.admin(),
                                         timeout=10).jsonl.decode()
        net = "dqn:4-" + "-".join(str(h) for h in spec.learner.hidden) + "-2"
        out = []
        for line in exp.splitlines():
            o = json.loads(line)
            if (o["network"] != net or o["batch"] != spec.learner.batch_size
                    or o["primitive"] not in ("sample", "update", "train")):
                continue  # (a GPU row is made of these three)
            o["device"] = "gpu-0123456789abcdef"
            o["latency_s"] = latency(o["latency_s"])
            out.append(json.dumps(o))
        self.assertTrue(out, "no stored rows for the spec's shape")
        return ("\n".join(out) + "\n").encode()

    def assert_all_finite(self, p):
        floats = [p.predicted_gps, p.measured_gps, p.register_ms]
        for row in p.table:
            floats += [row.learner_seconds, row.rmm_seconds]
        self.assertTrue(all(math.isfinite(x) for x in floats), str(p))

    def test_plan_extreme_latencies(self):
        admin = self.admin()
        spec = learner_spec()
        first = self.d.stub.Plan(pb.PlanRequest(spec=spec), metadata=admin, timeout=60)
        self.assert_all_finite(first.placement)
        n = self.profile_count()
        for latency, shown in ((5e-324, "4.94066e-324"), (1.7e308, "1.7e+308"),
                               (1e-10, "1e-10"), (3601.0, "3601")):
            gpu = self.gpu_rows(spec, lambda _: latency)
            self.refused(self.d.stub.Plan, pb.PlanRequest(spec=spec, gpu_profiles=gpu),
                         metadata=admin, timeout=30,
                         says=("gpu_profiles line 1: ", f"latency_s {shown} is outside "
                               "[1e-09, 3600] seconds"))
        # The edges and ordinary figures plan, every figure finite.
        for latency in (lambda _: 1e-9, lambda _: 3600.0, lambda t: t / 100):
            r = self.d.stub.Plan(pb.PlanRequest(spec=spec, gpu_profiles=self.gpu_rows(spec,
                                                                                   latency)),
                                 metadata=admin, timeout=30)
            p = r.placement
            self.assertTrue(p.mapping, p.note)
            self.assertEqual(p.table[1].learner_source, "assumed")
            self.assert_all_finite(p)
            self.assertGreater(p.predicted_gps, 0)
        self.assertEqual(self.profile_count(), n)  # a plan stores no assumed rows

    def test_import_extreme_latencies(self):
        admin = self.admin()
        self.d.stub.Plan(pb.PlanRequest(spec=learner_spec()), metadata=admin, timeout=60)
        exp = self.d.stub.ExportProfiles(pb.ExportProfilesRequest(), metadata=admin,
                                         timeout=10).jsonl.decode().splitlines()
        n = len(exp)
        self.assertGreater(n, 1)
        for latency in (5e-324, 1.7e308, 0.5e-9, 7200.0):
            o = json.loads(exp[1])
            o["latency_s"] = latency
            o["device"] = "gpu-00112233445566bb"
            body = (exp[0] + "\n" + json.dumps(o) + "\n").encode()
            self.refused(self.d.stub.ImportProfiles, pb.ImportProfilesRequest(jsonl=body),
                         metadata=admin, timeout=10, says=("line 2: ", "latency_s"))
            self.assertEqual(self.profile_count(), n)


if __name__ == "__main__":
    unittest.main(verbosity=2)
