#!/usr/bin/python3
"""The per-RPC authorization matrix, against the real replayd: every RPC of
api/replayd.proto (the Insert client stream included) with each of

  none     no x-replayd-token at all
  wrong    a random 64-hex-digit token
  other    another live workload's token
  deleted  the token of a workload that was deleted
  admin    the server's admin token (admin.token in its state directory)
  own      the target workload's own token

and the status the proto's contract gives it: data calls (Insert,
InsertBatch, Sample, UpdatePriorities, TrainStep, GetWeights) open only with
the workload's own token; DeleteWorkload, Checkpoint and ExportWorkload also
with the admin token (a Checkpoint of all workloads only with it); the
profile RPCs and Plan only with the admin token (UNAUTHENTICATED without a
token, PERMISSION_DENIED with any other); RegisterWorkload, ImportWorkload,
DescribeWorkload, ListWorkloads, ServerInfo and ListDevices need none and
answer the same whatever is sent. Every refused call must change nothing:
the counters and learner state of every workload, the workload list, the
stored profiles and the sampling probabilities (priorities) are compared
before and after.

usage: test_authz.py REPLAYD_EXE PROTO_DIR
"""
import os
import secrets
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import Daemon, pb, TOKEN_KEY, grpc, cartpole_spec, rows  # noqa: E402

OK = grpc.StatusCode.OK
UNAUTH = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED
KINDS = ("none", "wrong", "other", "deleted", "admin", "own")

# The contract per kind of RPC (api/replayd.proto, docs/architecture.md).
OPEN = dict.fromkeys(KINDS, OK)
OWN_ONLY = dict(none=UNAUTH, wrong=DENIED, other=DENIED, deleted=DENIED, admin=DENIED, own=OK)
OWN_OR_ADMIN = dict(OWN_ONLY, admin=OK)
ADMIN_ONLY = dict(none=UNAUTH, wrong=DENIED, other=DENIED, deleted=DENIED, admin=OK, own=DENIED)


def learner(hidden=(16, 16)):
    return pb.LearnerSpec(algorithm="dqn", hidden=list(hidden), batch_size=32, num_actions=2)


class TestAuthzMatrix(unittest.TestCase):
    """One daemon for the class; fresh workloads for each RPC's row."""

    @classmethod
    def setUpClass(cls):
        cls.state = tempfile.mkdtemp(prefix="replayd-authz-")
        cls.d = Daemon(cls.state)
        with open(os.path.join(cls.state, "admin.token")) as f:
            cls.admin = f.read().strip()

    @classmethod
    def tearDownClass(cls):
        rc = cls.d.stop()
        shutil.rmtree(cls.state, ignore_errors=True)
        assert rc == 0, f"replayd exited {rc} on SIGTERM"

    def setUp(self):
        self.assertTrue(self.d.alive())
        # The target (with a learner, so TrainStep and GetWeights can answer
        # OK), another live workload, and a deleted one.
        self.a = self.register(learner=learner())
        self.b = self.register(learner=learner())
        gone = self.register()
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=gone.id), metadata=self.md(gone.token),
                                   timeout=10)
        self.gone = gone
        # 100 rows with distinct priorities: every sampling probability differs.
        for w in (self.a, self.b):
            self.d.stub.InsertBatch(
                pb.InsertRequest(workload_id=w.id, rows=rows(100),
                                 priorities=[1.0 + i for i in range(100)]),
                metadata=self.md(w.token), timeout=10)
        self.tokens = dict(none=None, wrong=secrets.token_hex(32), other=self.b.token,
                           deleted=gone.token, admin=self.admin, own=self.a.token)

    def tearDown(self):
        self.assertTrue(self.d.alive(), "replayd died")
        # The daemon holds at most --max-workloads (64 by default) at once.
        for w in self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=10).workloads:
            self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=self.md(self.admin),
                                       timeout=10)

    # ---- helpers --------------------------------------------------------

    def register(self, **kw):
        return self.d.stub.RegisterWorkload(cartpole_spec(**kw), timeout=30)

    @staticmethod
    def md(token):
        return () if token is None else ((TOKEN_KEY, token),)

    def status(self, fn, *a, **kw):
        """(code, reply or None, details) of one call."""
        try:
            return OK, fn(*a, **kw), ""
        except grpc.RpcError as e:
            return e.code(), None, e.details()

    def probabilities(self, w):
        """key -> sampling probability of 100 items sampled from w."""
        s = self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=100),
                               metadata=self.md(w.token), timeout=10)
        return dict(zip(s.keys, s.probabilities))

    def profiles(self):
        e = self.d.stub.ExportProfiles(pb.ExportProfilesRequest(), metadata=self.md(self.admin),
                                       timeout=10)
        return sorted(e.jsonl.splitlines())

    def snapshot(self):
        ws = {}
        for w in self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=10).workloads:
            c = w.counters
            ws[w.id] = dict(inserts=c.inserts, samples=c.samples, updates=c.updates,
                            stale=c.stale_updates, size=c.size, bytes=c.bytes,
                            steps=w.learner.steps, weight_version=w.learner.weight_version)
        return ws, self.profiles()

    def matrix(self, name, expect, call):
        """call(kind, token) for every kind: the refused ones first (state
        compared around them), then the allowed ones. Returns the replies
        of the allowed ones by kind."""
        refused = [k for k in KINDS if expect[k] != OK]
        allowed = [k for k in KINDS if expect[k] == OK]
        p_a, p_b = self.probabilities(self.a), self.probabilities(self.b)
        before = self.snapshot()
        for kind in refused:
            code, _, details = self.status(call, kind, self.tokens[kind])
            self.assertEqual(code, expect[kind], f"{name} with {kind} token: {details}")
            self.assertTrue(details, f"{name} with {kind} token: a status without a message")
            self.assertNotIn(self.admin, details, "a status message shows the admin token")
        after = self.snapshot()
        for w, p in ((self.a, p_a), (self.b, p_b)):
            q = self.probabilities(w)
            common = set(p) & set(q)
            self.assertGreater(len(common), 10)
            self.assertEqual({k: q[k] for k in common}, {k: p[k] for k in common},
                             f"a refused {name} changed sampling probabilities")
        self.assertEqual(after, before, f"a refused {name} changed the server's state")
        replies = {}
        for kind in allowed:
            code, reply, details = self.status(call, kind, self.tokens[kind])
            self.assertEqual(code, OK, f"{name} with {kind} token: {details}")
            replies[kind] = reply
        return replies

    def assert_no_tokens(self, workloads):
        secret = {self.a.token, self.b.token, self.gone.token, self.admin}
        for w in workloads:
            self.assertEqual(w.token, "", "a reply other than RegisterWorkload's shows a token")
            self.assertNotIn(w.token, secret)

    # ---- no token needed -------------------------------------------------

    def test_register_workload(self):
        n = len(self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=10).workloads)
        got = self.matrix("RegisterWorkload", OPEN, lambda k, t: self.d.stub.RegisterWorkload(
            cartpole_spec(capacity=64), metadata=self.md(t), timeout=30))
        ids = {w.id for w in self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(),
                                                       timeout=10).workloads}
        self.assertEqual(len(ids), n + len(KINDS))
        for kind, w in got.items():
            self.assertIn(w.id, ids)
            self.assertEqual(len(w.token), 64)
            self.assertNotIn(w.token, self.tokens.values(), f"{kind}: a sent token came back")

    def test_describe_workload(self):
        got = self.matrix("DescribeWorkload", OPEN, lambda k, t: self.d.stub.DescribeWorkload(
            pb.WorkloadRef(id=self.a.id), metadata=self.md(t), timeout=10))
        self.assert_no_tokens(got.values())
        self.assertTrue(all(w.id == self.a.id and w.counters.inserts == 100
                            for w in got.values()))

    def test_list_workloads(self):
        got = self.matrix("ListWorkloads", OPEN, lambda k, t: self.d.stub.ListWorkloads(
            pb.ListWorkloadsRequest(), metadata=self.md(t), timeout=10))
        for r in got.values():
            self.assert_no_tokens(r.workloads)
            ids = {w.id for w in r.workloads}
            self.assertTrue({self.a.id, self.b.id} <= ids)
            self.assertNotIn(self.gone.id, ids)

    def test_server_info(self):
        got = self.matrix("ServerInfo", OPEN, lambda k, t: self.d.stub.ServerInfo(
            pb.ServerInfoRequest(), metadata=self.md(t), timeout=10))
        for r in got.values():
            self.assertTrue(r.version)
            self.assertEqual(r.devices[0].kind, "cpu")
            self.assert_no_tokens(r.workloads)

    def test_list_devices(self):
        got = self.matrix("ListDevices", OPEN, lambda k, t: self.d.stub.ListDevices(
            pb.ListDevicesRequest(), metadata=self.md(t), timeout=10))
        for r in got.values():
            self.assertEqual(r.devices[0].kind, "cpu")

    # ---- the workload's own token ----------------------------------------

    def test_insert_stream(self):
        def call(kind, token):
            def gen():
                for i in range(2):
                    yield pb.InsertRequest(workload_id=self.a.id, rows=rows(5, 5 * i))
            return self.d.stub.Insert(gen(), metadata=self.md(token), timeout=10)

        got = self.matrix("Insert", OWN_ONLY, call)
        self.assertEqual(got["own"].inserted, 10)
        self.assertEqual(self.describe(self.a).counters.inserts, 110)

    def test_insert_batch(self):
        got = self.matrix("InsertBatch", OWN_ONLY, lambda k, t: self.d.stub.InsertBatch(
            pb.InsertRequest(workload_id=self.a.id, rows=rows(5)), metadata=self.md(t),
            timeout=10))
        self.assertEqual(list(got["own"].keys), list(range(100, 105)))

    def test_sample(self):
        got = self.matrix("Sample", OWN_ONLY, lambda k, t: self.d.stub.Sample(
            pb.SampleRequest(workload_id=self.a.id, batch_size=8), metadata=self.md(t),
            timeout=10))
        self.assertEqual(len(got["own"].keys), 8)
        self.assertEqual(got["own"].rows.count, 8)

    def test_update_priorities(self):
        # Refused, these would make keys 0..9 by far the likeliest.
        got = self.matrix("UpdatePriorities", OWN_ONLY, lambda k, t: self.d.stub.UpdatePriorities(
            pb.UpdatePrioritiesRequest(workload_id=self.a.id, keys=list(range(10)),
                                       priorities=[1e4] * 10),
            metadata=self.md(t), timeout=10))
        self.assertEqual((got["own"].applied, got["own"].stale), (10, 0))
        s = self.d.stub.Sample(pb.SampleRequest(workload_id=self.a.id, batch_size=100),
                               metadata=self.md(self.a.token), timeout=10)
        # Keys 0..9 now hold about 56% of the mass (1e4^0.6 against sum i^0.6).
        self.assertGreater(sum(1 for k in s.keys if k < 10), 30, "the allowed update did not apply")

    def test_train_step(self):
        got = self.matrix("TrainStep", OWN_ONLY, lambda k, t: self.d.stub.TrainStep(
            pb.TrainStepRequest(workload_id=self.a.id, steps=2), metadata=self.md(t),
            timeout=30))
        self.assertEqual(got["own"].steps_done, 2)
        self.assertEqual(self.describe(self.a).learner.steps, 2)

    def test_get_weights(self):
        got = self.matrix("GetWeights", OWN_ONLY, lambda k, t: self.d.stub.GetWeights(
            pb.GetWeightsRequest(workload_id=self.a.id), metadata=self.md(t), timeout=10))
        self.assertEqual(got["own"].version, 1)
        self.assertEqual(got["own"].weights[:4], b"RDNN")

    # ---- the workload's own token or the admin token ---------------------

    def test_delete_workload(self):
        victims = {}

        def call(kind, token):
            if kind in ("admin", "own"):  # allowed: each deletes a workload of its own
                v = victims[kind] = self.register()
                token = v.token if kind == "own" else token
                return self.d.stub.DeleteWorkload(pb.WorkloadRef(id=v.id),
                                                  metadata=self.md(token), timeout=10)
            return self.d.stub.DeleteWorkload(pb.WorkloadRef(id=self.a.id),
                                              metadata=self.md(token), timeout=10)

        self.matrix("DeleteWorkload", OWN_OR_ADMIN, call)
        for v in victims.values():
            code, _, _ = self.status(self.describe, v)
            self.assertEqual(code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(self.describe(self.a).id, self.a.id)

    def describe(self, w):
        return self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10)

    # ---- durability (issue 22) -------------------------------------------

    def test_checkpoint(self):
        got = self.matrix("Checkpoint", OWN_OR_ADMIN, lambda k, t: self.d.stub.Checkpoint(
            pb.CheckpointRequest(workload_id=self.a.id), metadata=self.md(t), timeout=30))
        self.assertEqual(list(got["own"].workload_ids), [self.a.id])
        got = self.matrix("Checkpoint of all", ADMIN_ONLY, lambda k, t: self.d.stub.Checkpoint(
            pb.CheckpointRequest(all=True), metadata=self.md(t), timeout=30))
        self.assertIn(self.a.id, got["admin"].workload_ids)

    def test_export_workload(self):
        got = self.matrix("ExportWorkload", OWN_OR_ADMIN,
                          lambda k, t: self.d.stub.ExportWorkload(
                              pb.ExportWorkloadRequest(workload_id=self.a.id),
                              metadata=self.md(t), timeout=30))
        self.assertEqual(got["own"].data[:8], b"RPLYDCKP")

    def test_import_workload(self):
        data = self.d.stub.ExportWorkload(pb.ExportWorkloadRequest(workload_id=self.a.id),
                                          metadata=self.md(self.a.token), timeout=30).data
        got = self.matrix("ImportWorkload", OPEN, lambda k, t: self.d.stub.ImportWorkload(
            pb.ImportWorkloadRequest(data=data), metadata=self.md(t), timeout=60))
        self.assertEqual(len({r.id for r in got.values()}), len(KINDS))
        self.assert_no_tokens([])

    # ---- the admin token -------------------------------------------------

    def test_list_profiles(self):
        got = self.matrix("ListProfiles", ADMIN_ONLY, lambda k, t: self.d.stub.ListProfiles(
            pb.ListProfilesRequest(), metadata=self.md(t), timeout=10))
        self.assertEqual(len(got["admin"].profiles), len(self.profiles()))
        self.assertGreater(len(got["admin"].profiles), 0)

    def test_export_profiles(self):
        got = self.matrix("ExportProfiles", ADMIN_ONLY, lambda k, t: self.d.stub.ExportProfiles(
            pb.ExportProfilesRequest(), metadata=self.md(t), timeout=10))
        self.assertGreater(got["admin"].count, 0)

    def test_clear_profiles(self):
        n = len(self.profiles())
        self.assertGreater(n, 0)
        got = self.matrix("ClearProfiles", ADMIN_ONLY, lambda k, t: self.d.stub.ClearProfiles(
            pb.ClearProfilesRequest(), metadata=self.md(t), timeout=10))
        self.assertEqual(got["admin"].removed, n)
        self.assertEqual(self.profiles(), [])

    def test_import_profiles(self):
        # Profiles the store does not hold yet: batch 999 instead of 32.
        jsonl = b"\n".join(line.replace(b'"batch":32,', b'"batch":999,')
                           for line in self.profiles()) + b"\n"
        self.assertIn(b'"batch":999,', jsonl)
        n = len(self.profiles())
        got = self.matrix("ImportProfiles", ADMIN_ONLY, lambda k, t: self.d.stub.ImportProfiles(
            pb.ImportProfilesRequest(jsonl=jsonl), metadata=self.md(t), timeout=10))
        self.assertGreater(got["admin"].imported, 0)
        self.assertGreater(len(self.profiles()), n)

    def test_plan(self):
        # A shape not profiled yet: an accepted Plan measures and stores it.
        spec = cartpole_spec(learner=learner(hidden=(24, 24)))
        n = len(self.profiles())
        got = self.matrix("Plan", ADMIN_ONLY, lambda k, t: self.d.stub.Plan(
            pb.PlanRequest(spec=spec), metadata=self.md(t), timeout=60))
        self.assertTrue(got["admin"].placement.mapping)
        self.assertGreater(len(self.profiles()), n)

    # ---- a deleted workload ----------------------------------------------

    def test_deleted_workload_with_its_own_token(self):
        """Its token opens nothing: every call on it is NOT_FOUND."""
        g, md = self.gone, self.md(self.gone.token)

        def gen():
            yield pb.InsertRequest(workload_id=g.id, rows=rows(1))

        for name, fn, req in (
                ("DescribeWorkload", self.d.stub.DescribeWorkload, pb.WorkloadRef(id=g.id)),
                ("DeleteWorkload", self.d.stub.DeleteWorkload, pb.WorkloadRef(id=g.id)),
                ("Insert", self.d.stub.Insert, gen()),
                ("InsertBatch", self.d.stub.InsertBatch,
                 pb.InsertRequest(workload_id=g.id, rows=rows(1))),
                ("Sample", self.d.stub.Sample, pb.SampleRequest(workload_id=g.id, batch_size=1)),
                ("UpdatePriorities", self.d.stub.UpdatePriorities,
                 pb.UpdatePrioritiesRequest(workload_id=g.id, keys=[0], priorities=[1.0])),
                ("TrainStep", self.d.stub.TrainStep, pb.TrainStepRequest(workload_id=g.id,
                                                                         steps=1)),
                ("GetWeights", self.d.stub.GetWeights, pb.GetWeightsRequest(workload_id=g.id))):
            code, _, details = self.status(fn, req, metadata=md, timeout=10)
            self.assertEqual(code, grpc.StatusCode.NOT_FOUND, f"{name}: {details}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
