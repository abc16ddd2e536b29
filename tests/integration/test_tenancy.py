#!/usr/bin/python3
"""Tenants against the real replayd (api/replayd.proto, "Tenants"):

- the tenant RPCs (admin only), their validation, and what persists
  across a restart (tenants, quotas, tokens, who owns which workload);
- admission: a registration past its tenant's max_workloads or
  max_memory_bytes, or the server's --max-memory, is RESOURCE_EXHAUSTED
  naming the limit, and nothing is created (no workload, no stored
  profile, no usage charged); deleting gives the quota back;
- isolation on every RPC: a matrix of callers (no token, a random one,
  another tenant's, the owner tenant's, the workload's own, another
  workload's, the admin's) against a workload owned by tenant A, with
  refused calls compared for changes;
- row rates: a tenant's insert and sample token buckets refuse with
  RESOURCE_EXHAUSTED naming the quota, leave the table unchanged, do not
  touch another tenant, and give back the rows of a call that failed.

No assertion depends on timing: rates are 1 row/s, so a bucket in debt
after one large batch stays in debt for many seconds on any machine.

- replayctl tenant add | set | ls | rm, and describe's tenant.

usage: test_tenancy.py REPLAYD_EXE PROTO_DIR REPLAYCTL
"""
import json
import os
import queue
import secrets
import subprocess
import sys
import unittest

REPLAYCTL = os.path.abspath(sys.argv[3])
del sys.argv[3:4]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from replayd_test import (Daemon, DaemonCase, pb, TOKEN_KEY, grpc,  # noqa: E402
                          cartpole_spec, rows)

OK = grpc.StatusCode.OK
UNAUTH = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED
NOT_FOUND = grpc.StatusCode.NOT_FOUND
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
INVALID = grpc.StatusCode.INVALID_ARGUMENT
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


def md(token):
    return () if token is None else ((TOKEN_KEY, token),)


def status(fn, *a, **kw):
    try:
        return OK, fn(*a, **kw), ""
    except grpc.RpcError as e:
        return e.code(), None, e.details()


def learner(hidden=(16, 16)):
    return pb.LearnerSpec(algorithm="dqn", hidden=list(hidden), batch_size=32, num_actions=2)


class TenantCase(DaemonCase):
    replayctl = REPLAYCTL

    def setUp(self):
        super().setUp()
        self.admin_md = self.admin()
        self.admin_token = self.admin_md[0][1]

    def add(self, name, **quota):
        return self.d.stub.AddTenant(pb.AddTenantRequest(name=name, quota=pb.TenantQuota(**quota)),
                                     metadata=self.admin_md, timeout=10)

    def tenants(self):
        r = self.d.stub.ListTenants(pb.ListTenantsRequest(), metadata=self.admin_md, timeout=10)
        return {t.name: t for t in r.tenants}

    def register(self, token=None, **kw):
        return self.d.stub.RegisterWorkload(cartpole_spec(**kw), metadata=md(token), timeout=60)

    def all_ids(self):
        r = self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), metadata=self.admin_md,
                                      timeout=10)
        return {w.id for w in r.workloads}

    def profiles(self):
        return self.d.stub.ExportProfiles(pb.ExportProfilesRequest(), metadata=self.admin_md,
                                          timeout=10).count


class TestTenantAdmin(TenantCase):
    def test_add_list_set_remove(self):
        self.assertEqual(set(self.tenants()), {"default"})
        t = self.add("team-a", max_workloads=3, weight=2, insert_rows_per_second=500)
        self.assertEqual(t.name, "team-a")
        self.assertEqual(len(t.token), 64)
        self.assertEqual((t.quota.max_workloads, t.quota.weight), (3, 2))
        ts = self.tenants()
        self.assertEqual(set(ts), {"default", "team-a"})
        self.assertEqual(ts["team-a"].token, "", "ListTenants shows a token")
        self.assertEqual(ts["team-a"].quota.insert_rows_per_second, 500)
        self.assertEqual(ts["default"].quota.weight, 1)
        # Set changes only the fields it names.
        s = self.d.stub.SetTenant(pb.SetTenantRequest(name="team-a", max_memory_bytes=1 << 30),
                                  metadata=self.admin_md, timeout=10)
        self.assertEqual(s.token, "")
        self.assertEqual((s.quota.max_memory_bytes, s.quota.max_workloads, s.quota.weight),
                         (1 << 30, 3, 2))
        self.d.stub.RemoveTenant(pb.RemoveTenantRequest(name="team-a"), metadata=self.admin_md,
                                 timeout=10)
        self.assertEqual(set(self.tenants()), {"default"})
        # Its token opens nothing now: it registers as the default tenant.
        w = self.register(t.token)
        self.assertEqual(w.tenant, "default")

    def test_refusals(self):
        self.add("a")
        for name, q, code, text in (
                ("a", {}, INVALID, "already exists"),
                ("", {}, INVALID, "1 to 63"),
                ("A", {}, INVALID, "lowercase"),
                ("-x", {}, INVALID, "lowercase"),
                ("x" * 64, {}, INVALID, "1 to 63"),
                ("b", dict(weight=1001), INVALID, "weight"),
                ("b", dict(insert_rows_per_second=-1), INVALID, "insert_rows_per_second"),
                ("b", dict(sample_rows_per_second=float("nan")), INVALID,
                 "sample_rows_per_second")):
            code_got, _, details = status(self.add, name, **q)
            self.assertEqual(code_got, code, f"{name!r} {q}: {details}")
            self.assertIn(text, details)
        self.assertEqual(set(self.tenants()), {"default", "a"})
        c, _, det = status(self.d.stub.SetTenant, pb.SetTenantRequest(name="nobody", weight=2),
                           metadata=self.admin_md, timeout=10)
        self.assertEqual(c, NOT_FOUND, det)
        c, _, det = status(self.d.stub.SetTenant, pb.SetTenantRequest(name="a", weight=5000),
                           metadata=self.admin_md, timeout=10)
        self.assertEqual(c, INVALID, det)
        self.assertEqual(self.tenants()["a"].quota.weight, 1, "a refused set changed the quota")
        c, _, det = status(self.d.stub.RemoveTenant, pb.RemoveTenantRequest(name="default"),
                           metadata=self.admin_md, timeout=10)
        self.assertEqual(c, PRECONDITION, det)
        c, _, det = status(self.d.stub.RemoveTenant, pb.RemoveTenantRequest(name="nobody"),
                           metadata=self.admin_md, timeout=10)
        self.assertEqual(c, NOT_FOUND, det)

    def test_remove_refused_while_it_owns_workloads(self):
        t = self.add("a")
        w = self.register(t.token)
        c, _, det = status(self.d.stub.RemoveTenant, pb.RemoveTenantRequest(name="a"),
                           metadata=self.admin_md, timeout=10)
        self.assertEqual(c, PRECONDITION, det)
        self.assertIn("owns 1 workloads", det)
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=md(t.token), timeout=10)
        self.d.stub.RemoveTenant(pb.RemoveTenantRequest(name="a"), metadata=self.admin_md,
                                 timeout=10)

    def test_tenant_rpcs_are_the_admins(self):
        t = self.add("a")
        w = self.register(t.token)
        calls = (
            ("AddTenant", self.d.stub.AddTenant, pb.AddTenantRequest(name="zz")),
            ("SetTenant", self.d.stub.SetTenant, pb.SetTenantRequest(name="a", weight=9)),
            ("ListTenants", self.d.stub.ListTenants, pb.ListTenantsRequest()),
            ("RemoveTenant", self.d.stub.RemoveTenant, pb.RemoveTenantRequest(name="a")))
        for name, fn, req in calls:
            for kind, token, code in (("none", None, UNAUTH),
                                      ("wrong", secrets.token_hex(32), DENIED),
                                      ("tenant", t.token, DENIED),
                                      ("workload", w.token, DENIED)):
                got, _, det = status(fn, req, metadata=md(token), timeout=10)
                self.assertEqual(got, code, f"{name} with {kind}: {det}")
                self.assertNotIn(self.admin_token, det)
        ts = self.tenants()
        self.assertEqual(set(ts), {"default", "a"})
        self.assertEqual(ts["a"].quota.weight, 1)

    def test_persists_across_restart(self):
        t = self.add("a", max_workloads=5, sample_rows_per_second=7.5)
        self.d.stub.SetTenant(pb.SetTenantRequest(name="default", max_workloads=9),
                              metadata=self.admin_md, timeout=10)
        wa = self.register(t.token)
        wd = self.register()
        self.assertEqual(self.d.stop(), 0)
        self.d = Daemon(self.state)
        ts = self.tenants()
        self.assertEqual(set(ts), {"default", "a"})
        self.assertEqual((ts["a"].quota.max_workloads, ts["a"].quota.sample_rows_per_second),
                         (5, 7.5))
        self.assertEqual(ts["default"].quota.max_workloads, 9)
        self.assertEqual((ts["a"].workloads, ts["default"].workloads), (1, 1))
        # The tenant's token still opens its workload; the default's view
        # does not show it.
        got = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=wa.id), metadata=md(t.token),
                                           timeout=10)
        self.assertEqual(got.tenant, "a")
        anon = {w.id for w in self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(),
                                                        timeout=10).workloads}
        self.assertEqual(anon, {wd.id})


class TestAdmission(TenantCase):
    extra = ("--max-memory", str(64 << 20))

    def test_default_tenant_unconfigured(self):
        w = self.register()
        self.assertEqual(w.tenant, "default")
        self.assertEqual(self.tenants()["default"].workloads, 1)

    def test_max_workloads(self):
        t = self.add("a", max_workloads=2)
        ids = {self.register(t.token).id for _ in range(2)}
        before = self.all_ids()
        e = self.assert_code(EXHAUSTED, self.register, t.token)
        self.assertIn('tenant "a"', e.details())
        self.assertIn("max_workloads", e.details())
        self.assertEqual(self.all_ids(), before, "a refused registration left a workload")
        self.assertEqual(self.tenants()["a"].workloads, 2)
        # Another tenant is not limited by a's quota.
        self.register()
        # Deleting one gives the quota back.
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=ids.pop()), metadata=md(t.token), timeout=10)
        self.register(t.token)
        self.assertEqual(self.tenants()["a"].workloads, 2)

    def test_max_memory_nothing_half_created(self):
        t = self.add("a", max_memory_bytes=2 << 20)
        small = self.register(t.token, capacity=1000)
        used = self.tenants()["a"].memory_bytes
        self.assertGreater(used, 0)
        n_profiles = self.profiles()
        before = self.all_ids()
        # A learner's shape not profiled yet: the refusal comes before any
        # measuring, so no profile is stored either.
        spec = dict(capacity=100000, learner=learner(hidden=(40, 40)))
        e = self.assert_code(EXHAUSTED, self.register, t.token, **spec)
        self.assertIn("max_memory_bytes", e.details())
        self.assertIn('tenant "a"', e.details())
        self.assertEqual(self.all_ids(), before)
        self.assertEqual(self.profiles(), n_profiles, "a refused registration was profiled")
        info = self.tenants()["a"]
        self.assertEqual((info.workloads, info.memory_bytes), (1, used))
        # The same spec fits once the quota is raised.
        self.d.stub.SetTenant(pb.SetTenantRequest(name="a", max_memory_bytes=1 << 30),
                              metadata=self.admin_md, timeout=10)
        big = self.register(t.token, **spec)
        self.assertEqual(big.tenant, "a")
        self.assertEqual(self.tenants()["a"].workloads, 2)
        self.assertGreater(self.tenants()["a"].memory_bytes, used)
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=big.id), metadata=md(t.token), timeout=10)
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=small.id), metadata=md(t.token), timeout=10)
        info = self.tenants()["a"]
        self.assertEqual((info.workloads, info.memory_bytes), (0, 0))

    def test_server_memory_named(self):
        t = self.add("a")  # no memory quota of its own: the server's applies
        before = self.all_ids()
        e = self.assert_code(EXHAUSTED, self.register, t.token, capacity=1 << 24)
        self.assertIn("--max-memory", e.details())
        self.assertEqual(self.all_ids(), before)
        self.assertEqual(self.tenants()["a"].workloads, 0)

    def test_default_tenant_quota(self):
        self.d.stub.SetTenant(pb.SetTenantRequest(name="default", max_workloads=1),
                              metadata=self.admin_md, timeout=10)
        self.register()
        e = self.assert_code(EXHAUSTED, self.register)
        self.assertIn('tenant "default"', e.details())
        t = self.add("a")
        self.register(t.token)  # a tenant of its own is not the default's quota


KINDS = ("none", "wrong", "tenant_b", "tenant_a", "own", "other_wl", "admin")
DATA = dict(none=UNAUTH, wrong=DENIED, tenant_b=NOT_FOUND, tenant_a=OK, own=OK,
            other_wl=DENIED, admin=DENIED)
DELETE = dict(DATA, admin=OK)
SEE = dict(none=NOT_FOUND, wrong=NOT_FOUND, tenant_b=NOT_FOUND, tenant_a=OK, own=OK,
           other_wl=NOT_FOUND, admin=OK)
ADMIN_ONLY = dict(none=UNAUTH, wrong=DENIED, tenant_b=DENIED, tenant_a=DENIED, own=DENIED,
                  other_wl=DENIED, admin=OK)


class TestIsolation(TenantCase):
    """Workload a of tenant A (with a learner), b of tenant B, d of the
    default tenant; every RPC with every kind of caller."""

    def setUp(self):
        super().setUp()
        self.ta = self.add("a")
        self.tb = self.add("b")
        self.a = self.register(self.ta.token, learner=learner())
        self.b = self.register(self.tb.token)
        self.dflt = self.register()
        for w in (self.a, self.b, self.dflt):
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(100),
                                                     priorities=[1.0 + i for i in range(100)]),
                                    metadata=md(w.token), timeout=10)
        self.tokens = dict(none=None, wrong=secrets.token_hex(32), tenant_b=self.tb.token,
                           tenant_a=self.ta.token, own=self.a.token, other_wl=self.b.token,
                           admin=self.admin_token)

    def snapshot(self):
        r = self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), metadata=self.admin_md,
                                      timeout=10)
        ws = {}
        for w in r.workloads:
            c = w.counters
            ws[w.id] = (c.inserts, c.samples, c.updates, c.size, w.learner.steps,
                        w.learner.weight_version, w.tenant)
        return ws, {n: (t.workloads, t.memory_bytes) for n, t in self.tenants().items()}

    def probabilities(self, w):
        s = self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=100),
                               metadata=md(w.token), timeout=10)
        return dict(zip(s.keys, s.probabilities))

    def matrix(self, name, expect, call):
        p_a = self.probabilities(self.a)
        before = self.snapshot()
        for kind in (k for k in KINDS if expect[k] != OK):
            code, _, details = status(call, kind, self.tokens[kind])
            self.assertEqual(code, expect[kind], f"{name} with {kind}: {details}")
            self.assertTrue(details)
            for secret in (self.admin_token, self.ta.token, self.tb.token, self.a.token):
                self.assertNotIn(secret, details)
        self.assertEqual(self.snapshot(), before, f"a refused {name} changed the server's state")
        q = self.probabilities(self.a)
        common = set(p_a) & set(q)
        self.assertGreater(len(common), 10)
        self.assertEqual({k: q[k] for k in common}, {k: p_a[k] for k in common})
        got = {}
        for kind in (k for k in KINDS if expect[k] == OK):
            code, reply, details = status(call, kind, self.tokens[kind])
            self.assertEqual(code, OK, f"{name} with {kind}: {details}")
            got[kind] = reply
        return got

    def test_data_calls(self):
        a = self.a.id

        def gen():
            for i in range(2):
                yield pb.InsertRequest(workload_id=a, rows=rows(5, 5 * i))

        calls = (
            ("Insert", lambda k, t: self.d.stub.Insert(gen(), metadata=md(t), timeout=10)),
            ("InsertBatch", lambda k, t: self.d.stub.InsertBatch(
                pb.InsertRequest(workload_id=a, rows=rows(5)), metadata=md(t), timeout=10)),
            ("Sample", lambda k, t: self.d.stub.Sample(
                pb.SampleRequest(workload_id=a, batch_size=8), metadata=md(t), timeout=10)),
            ("UpdatePriorities", lambda k, t: self.d.stub.UpdatePriorities(
                pb.UpdatePrioritiesRequest(workload_id=a, keys=list(range(10)),
                                           priorities=[1e4] * 10), metadata=md(t), timeout=10)),
            ("TrainStep", lambda k, t: self.d.stub.TrainStep(
                pb.TrainStepRequest(workload_id=a, steps=2), metadata=md(t), timeout=60)),
            ("GetWeights", lambda k, t: self.d.stub.GetWeights(
                pb.GetWeightsRequest(workload_id=a), metadata=md(t), timeout=10)))
        for name, call in calls:
            with self.subTest(rpc=name):
                got = self.matrix(name, DATA, call)
                self.assertEqual(set(got), {"tenant_a", "own"})
        w = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=a), metadata=md(self.ta.token),
                                         timeout=10)
        self.assertEqual(w.counters.inserts, 100 + 2 * (10 + 5))
        self.assertEqual(w.learner.steps, 4)

    def test_delete(self):
        victims = []

        def call(kind, token):
            if DELETE[kind] == OK:
                v = self.register(self.ta.token)
                victims.append(v)
                token = v.token if kind == "own" else token
                return self.d.stub.DeleteWorkload(pb.WorkloadRef(id=v.id), metadata=md(token),
                                                  timeout=10)
            return self.d.stub.DeleteWorkload(pb.WorkloadRef(id=self.a.id), metadata=md(token),
                                              timeout=10)

        self.matrix("DeleteWorkload", DELETE, call)
        self.assertEqual(len(victims), 3)
        ids = self.all_ids()
        self.assertIn(self.a.id, ids)
        self.assertFalse({v.id for v in victims} & ids)

    def test_durability_calls(self):
        a = self.a.id
        self.matrix("Checkpoint", DELETE, lambda k, t: self.d.stub.Checkpoint(
            pb.CheckpointRequest(workload_id=a), metadata=md(t), timeout=60))
        got = self.matrix("ExportWorkload", DELETE, lambda k, t: self.d.stub.ExportWorkload(
            pb.ExportWorkloadRequest(workload_id=a), metadata=md(t), timeout=60))
        data = got["tenant_a"].data
        # An import belongs to the caller's tenant, within its quota.
        w = self.d.stub.ImportWorkload(pb.ImportWorkloadRequest(data=data),
                                       metadata=md(self.tb.token), timeout=60)
        self.assertEqual(w.tenant, "b")
        self.assertEqual(self.tenants()["b"].workloads, 2)
        self.d.stub.SetTenant(pb.SetTenantRequest(name="b", max_workloads=2),
                              metadata=self.admin_md, timeout=10)
        before = self.all_ids()
        e = self.assert_code(EXHAUSTED, self.d.stub.ImportWorkload,
                             pb.ImportWorkloadRequest(data=data), metadata=md(self.tb.token),
                             timeout=60)
        self.assertIn("max_workloads", e.details())
        self.assertEqual(self.all_ids(), before)
        anon = self.d.stub.ImportWorkload(pb.ImportWorkloadRequest(data=data), timeout=60)
        self.assertEqual(anon.tenant, "default")
        # Checkpoints of every workload stay the admin's.
        c, _, det = status(self.d.stub.Checkpoint, pb.CheckpointRequest(all=True),
                           metadata=md(self.ta.token), timeout=60)
        self.assertEqual(c, DENIED, det)

    def test_describe(self):
        got = self.matrix("DescribeWorkload", SEE, lambda k, t: self.d.stub.DescribeWorkload(
            pb.WorkloadRef(id=self.a.id), metadata=md(t), timeout=10))
        for w in got.values():
            self.assertEqual((w.id, w.tenant, w.token), (self.a.id, "a", ""))
        # The default tenant's workload: open to callers without a tenant
        # token, as before tenants; not to tenants.
        for kind, code in (("none", OK), ("wrong", OK), ("tenant_a", NOT_FOUND),
                           ("tenant_b", NOT_FOUND), ("admin", OK)):
            c, _, det = status(self.d.stub.DescribeWorkload, pb.WorkloadRef(id=self.dflt.id),
                               metadata=md(self.tokens[kind]), timeout=10)
            self.assertEqual(c, code, f"{kind}: {det}")

    def test_list_and_server_info(self):
        seen = dict(none={self.dflt.id}, wrong={self.dflt.id}, other_wl={self.dflt.id},
                    own={self.dflt.id}, tenant_a={self.a.id}, tenant_b={self.b.id},
                    admin={self.a.id, self.b.id, self.dflt.id})
        for kind in KINDS:
            t = self.tokens[kind]
            lw = self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), metadata=md(t), timeout=10)
            self.assertEqual({w.id for w in lw.workloads}, seen[kind], f"List with {kind}")
            self.assertTrue(all(w.token == "" for w in lw.workloads))
            si = self.d.stub.ServerInfo(pb.ServerInfoRequest(), metadata=md(t), timeout=10)
            self.assertEqual({w.id for w in si.workloads}, seen[kind], f"ServerInfo with {kind}")
            self.assertEqual(si.workload_count, len(seen[kind]))
        # Paging keeps to the owner's workloads too.
        more = {self.register(self.ta.token).id for _ in range(3)} | {self.a.id}
        got, token = set(), ""
        while True:
            p = self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(page_size=1, page_token=token),
                                          metadata=md(self.ta.token), timeout=10)
            got |= {w.id for w in p.workloads}
            token = p.next_page_token
            if not token:
                break
        self.assertEqual(got, more)

    def test_register_owner(self):
        for kind, owner in (("none", "default"), ("wrong", "default"), ("own", "default"),
                            ("tenant_a", "a"), ("tenant_b", "b"), ("admin", "default")):
            w = self.register(self.tokens[kind], capacity=64)
            self.assertEqual(w.tenant, owner, kind)
            self.assertEqual(len(w.token), 64)

    def test_admin_calls_refuse_tenants(self):
        for name, fn, req in (
                ("ListProfiles", self.d.stub.ListProfiles, pb.ListProfilesRequest()),
                ("ExportProfiles", self.d.stub.ExportProfiles, pb.ExportProfilesRequest()),
                ("ClearProfiles", self.d.stub.ClearProfiles, pb.ClearProfilesRequest()),
                ("Plan", self.d.stub.Plan, pb.PlanRequest(spec=cartpole_spec(
                    learner=learner())))):
            c, _, det = status(fn, req, metadata=md(self.ta.token), timeout=60)
            self.assertEqual(c, DENIED, f"{name}: {det}")
        self.assertGreater(self.profiles(), 0)
        devs = self.d.stub.ListDevices(pb.ListDevicesRequest(), metadata=md(self.ta.token),
                                       timeout=10)
        self.assertEqual(devs.devices[0].kind, "cpu")


class TestRates(TenantCase):
    def setUp(self):
        super().setUp()
        self.ta = self.add("a", insert_rows_per_second=1, sample_rows_per_second=1)
        self.tb = self.add("b")
        self.a = self.register(self.ta.token)
        self.b = self.register(self.tb.token)

    def inserts(self, w):
        return self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), metadata=self.admin_md,
                                            timeout=10).counters.inserts

    def insert(self, w, n, token=None):
        return self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(n)),
                                       metadata=md(token or w.token), timeout=10)

    def test_insert_rate(self):
        self.insert(self.a, 50)  # one batch may overdraw the bucket: 1 - 50
        e = self.assert_code(EXHAUSTED, self.insert, self.a, 1)
        self.assertIn("insert_rows_per_second", e.details())
        self.assertIn('tenant "a"', e.details())
        e = self.assert_code(EXHAUSTED, self.insert, self.a, 1, self.ta.token)
        self.assertEqual(self.inserts(self.a), 50)
        # The Insert stream is charged per message.
        def gen():
            yield pb.InsertRequest(workload_id=self.a.id, rows=rows(1))
        self.assert_code(EXHAUSTED, self.d.stub.Insert, gen(), metadata=md(self.a.token),
                         timeout=10)
        self.assertEqual(self.inserts(self.a), 50)
        # Another tenant is not limited by a's bucket.
        for _ in range(5):
            self.insert(self.b, 100)
        self.assertEqual(self.inserts(self.b), 500)
        # Lifting the quota takes effect at once.
        self.d.stub.SetTenant(pb.SetTenantRequest(name="a", insert_rows_per_second=0),
                              metadata=self.admin_md, timeout=10)
        self.insert(self.a, 10)
        self.assertEqual(self.inserts(self.a), 60)

    def test_sample_rate(self):
        self.insert(self.a, 5)
        self.d.stub.SetTenant(pb.SetTenantRequest(name="a", insert_rows_per_second=0),
                              metadata=self.admin_md, timeout=10)
        self.insert(self.a, 100)
        self.insert(self.b, 100)
        s = self.d.stub.Sample(pb.SampleRequest(workload_id=self.a.id, batch_size=32),
                               metadata=md(self.a.token), timeout=10)
        self.assertEqual(len(s.keys), 32)
        e = self.assert_code(EXHAUSTED, self.d.stub.Sample,
                             pb.SampleRequest(workload_id=self.a.id, batch_size=1),
                             metadata=md(self.a.token), timeout=10)
        self.assertIn("sample_rows_per_second", e.details())
        for _ in range(5):
            self.d.stub.Sample(pb.SampleRequest(workload_id=self.b.id, batch_size=64),
                               metadata=md(self.b.token), timeout=10)

    def test_sample_stream(self):
        self.d.stub.SetTenant(pb.SetTenantRequest(name="a", insert_rows_per_second=0),
                              metadata=self.admin_md, timeout=10)
        self.insert(self.a, 100)
        q = queue.Queue()
        q.put(pb.SampleStreamRequest(workload_id=self.a.id, batch_size=8, window=4))

        def reqs():
            while True:
                m = q.get()
                if m is None:
                    return
                yield m

        it = self.d.stub.SampleStream(reqs(), metadata=md(self.a.token), timeout=30)
        self.assertEqual(len(next(it).keys), 8)  # the bucket's 1 row, overdrawn by 8
        with self.assertRaises(grpc.RpcError) as cm:
            for _ in it:
                pass
        q.put(None)
        self.assertEqual(cm.exception.code(), EXHAUSTED, cm.exception.details())
        self.assertIn("sample_rows_per_second", cm.exception.details())

    def test_failed_call_costs_nothing(self):
        # A malformed batch of 40 rows (one column missing) is refused by the
        # workload after the bucket charged it: the rows come back, so the
        # next valid batch still finds the bucket at its full 1 row.
        bad = pb.RowBatch(count=40, columns=list(rows(40).columns)[:4])
        for _ in range(3):
            self.assert_code(INVALID, self.d.stub.InsertBatch,
                             pb.InsertRequest(workload_id=self.a.id, rows=bad),
                             metadata=md(self.a.token), timeout=10)
        self.insert(self.a, 5)
        self.assertEqual(self.inserts(self.a), 5)
        # Sampling an empty table fails: no rows are kept either.
        self.d.stub.SetTenant(pb.SetTenantRequest(name="a", insert_rows_per_second=0),
                              metadata=self.admin_md, timeout=10)
        empty = self.register(self.ta.token)
        for _ in range(3):
            self.assert_code(PRECONDITION, self.d.stub.Sample,
                             pb.SampleRequest(workload_id=empty.id, batch_size=50),
                             metadata=md(empty.token), timeout=10)
        self.d.stub.Sample(pb.SampleRequest(workload_id=self.a.id, batch_size=3),
                           metadata=md(self.a.token), timeout=10)


class TestReplayctl(TenantCase):
    def test_tenant_commands(self):
        r = self.ctl("tenant", "add", "team-a", "max-memory=2G", "max-workloads=4", "weight=3",
                     "insert-rate=1000")
        tok = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("token ")]
        self.assertEqual(len(tok), 1, r.stdout)
        self.assertEqual(len(tok[0]), 64)
        t = self.tenants()["team-a"]
        self.assertEqual((t.quota.max_memory_bytes, t.quota.max_workloads, t.quota.weight,
                          t.quota.insert_rows_per_second), (2 << 30, 4, 3, 1000))
        w = self.register(tok[0])
        r = self.ctl("--json", "tenant", "set", "team-a", "sample-rate=2.5", "weight=1")
        j = json.loads(r.stdout)
        self.assertEqual((j["weight"], j["sample_rows_per_second"], j["max_workloads"]),
                         (1, 2.5, 4))
        self.assertNotIn("token", j)
        j = json.loads(self.ctl("--json", "tenant", "ls").stdout)
        self.assertEqual([t["name"] for t in j], ["default", "team-a"])
        self.assertEqual(j[1]["workloads"], 1)
        text = self.ctl("tenant", "ls").stdout
        self.assertIn("team-a", text)
        self.assertNotIn(tok[0], text)
        # replayctl's views: the admin token's by default (its file is
        # readable here: every tenant's workloads), --token a tenant's
        # (its own only), and with no token file the default tenant's.
        wd = self.register()
        self.assertEqual(json.loads(self.ctl("--json", "describe", w.id).stdout)["tenant"],
                         "team-a")
        ls = lambda *a: {x["id"] for x in
                         json.loads(self.ctl("--json", *a, "ls").stdout)["workloads"]}
        self.assertEqual(ls(), {w.id, wd.id})
        self.assertEqual(ls("--token", tok[0]), {w.id})
        r = self.ctl("--token", tok[0], "describe", wd.id, ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("NOT_FOUND", r.stderr)
        env = dict(os.environ, STATE_DIRECTORY=os.path.join(self.state, "no-such-dir"))
        r = subprocess.run([self.replayctl, "--server", f"127.0.0.1:{self.d.port}", "describe",
                            w.id], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("NOT_FOUND", r.stderr)
        self.assertEqual(json.loads(self.ctl("--json", "describe", wd.id).stdout)["tenant"],
                         "default")
        self.assertIn("default", [ln.split()[-1] for ln in
                                  self.ctl("describe", wd.id).stdout.splitlines()
                                  if ln.strip().startswith("tenant")])
        # Refusals: the server's (exit 1) and the command line's (exit 2).
        r = self.ctl("tenant", "rm", "team-a", ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("owns 1 workloads", r.stderr)
        for args in (("tenant",), ("tenant", "add"), ("tenant", "set", "team-a"),
                     ("tenant", "add", "x", "weight=abc"), ("tenant", "add", "x", "nope=1"),
                     ("tenant", "add", "x", "weight=1", "weight=2"), ("tenant", "ls", "x"),
                     ("tenant", "add", "x", "max-memory=-1"), ("tenant", "rm", "a", "b")):
            r = self.ctl(*args, ok=False)
            self.assertEqual(r.returncode, 2, f"{args}: {r.stderr}")
        self.assertEqual(set(self.tenants()), {"default", "team-a"})
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=md(tok[0]), timeout=10)
        self.assertIn("removed tenant team-a", self.ctl("tenant", "rm", "team-a").stdout)
        self.assertEqual(set(self.tenants()), {"default"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
