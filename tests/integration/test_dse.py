#!/usr/bin/python3
"""Design-space exploration on registration (issue 5), against the real
replayd on an ephemeral loopback port: profiles and their cache, the
mapping in RegisterWorkload/DescribeWorkload, Plan, the admin-gated profile
RPCs, ListDevices, and replayctl's devices/profiles/plan/describe.

usage: test_dse.py REPLAYD_EXE PROTO_DIR REPLAYCTL_EXE FPGA_PARTS_DIR
"""
import json
import os
import sys
import tempfile
import unittest

REPLAYCTL = os.path.abspath(sys.argv[3])
PARTS = os.path.abspath(sys.argv[4])
del sys.argv[3:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import TOKEN_KEY, Daemon, DaemonCase, dqn_spec, grpc, pb  # noqa: E402


def learner_spec(batch=64, hidden=(64, 64), capacity=10000, name="dqn"):
    return dqn_spec(name=name, capacity=capacity, hidden=hidden, batch=batch)


class DseBase(DaemonCase):
    replayctl = REPLAYCTL

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-dse-")
        self.d = self.start()

    def start(self):
        return Daemon(self.state, "--fpga-parts-dir", PARTS)

    def plan(self, req, **kw):
        """Plan with the admin token (Plan measures and stores profiles)."""
        return self.d.stub.Plan(req, metadata=self.admin(), **kw)

    def profiles(self):
        return list(self.d.stub.ListProfiles(pb.ListProfilesRequest(), metadata=self.admin(),
                                             timeout=10).profiles)


class TestRegistration(DseBase):
    def test_cold_then_warm(self):
        w1 = self.d.stub.RegisterWorkload(learner_spec(), timeout=30)
        p = w1.placement
        self.assertFalse(p.profile_cache_hit)
        self.assertGreater(p.profiles_measured, 0)
        self.assertEqual(p.mapping, "C-C-C")
        self.assertEqual(p.running, "C-C-C")
        self.assertGreater(p.predicted_gps, 0)
        self.assertEqual(p.batch, 64)
        cpu = p.table[0]
        self.assertEqual((cpu.device, cpu.learner_source, cpu.rmm_source),
                         ("cpu", "measured", "measured"))
        self.assertGreater(cpu.learner_seconds, 0)
        self.assertFalse(p.table[1].present)  # no GPU here
        # The bound: 1.5 s of profiling per device, plus slack for a busy machine.
        self.assertLess(p.register_ms, 3000)
        w2 = self.d.stub.RegisterWorkload(learner_spec(name="again"), timeout=30)
        q = w2.placement
        self.assertTrue(q.profile_cache_hit)
        self.assertEqual(q.profiles_measured, 0)
        self.assertEqual(q.table[0].learner_source, "cached")
        self.assertEqual(q.table[0].learner_seconds, cpu.learner_seconds)
        log = self.d.log_after("(hit;", "profile cache miss", "profile cache hit")
        self.assertIn("(hit;", log)
        self.assertIn("profile cache miss", log)
        self.assertIn("profile cache hit", log)
        # Describe carries it; a replay-only workload has none.
        dsc = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w2.id), timeout=10)
        self.assertEqual(dsc.placement.mapping, "C-C-C")
        self.assertEqual(dsc.placement.measured_gps, 0)
        plain = learner_spec()
        plain.ClearField("learner")
        w3 = self.d.stub.RegisterWorkload(plain, timeout=10)
        self.assertFalse(w3.HasField("placement"))

    def test_pipeline_threads_pinned(self):
        """daemon/learn/cores.h: each learner workload's learner and sampler threads
        are pinned to the daemon's least-used CPUs, the placement says where,
        and the threads really run there."""
        allowed = sorted(os.sched_getaffinity(self.d.proc.pid))
        load = {c: 0 for c in allowed}

        def expect():  # the rule: least loaded, then lowest; learner 1 thread
            order = sorted(allowed, key=lambda c: (load[c], c))
            return str(order[0]), str(order[1]) if len(order) > 1 else ""

        def thread_masks():
            masks = []
            task = f"/proc/{self.d.proc.pid}/task"
            for t in os.listdir(task):
                with open(f"{task}/{t}/status") as f:
                    for line in f:
                        if line.startswith("Cpus_allowed_list:"):
                            masks.append(line.split()[1])
            return masks

        ws = []
        for i in range(2):
            want = expect()
            w = self.d.stub.RegisterWorkload(learner_spec(name=f"pin{i}"), timeout=30)
            got = (w.placement.learner_cpus, w.placement.sampler_cpus)
            self.assertEqual(got, want)
            dsc = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10)
            self.assertEqual((dsc.placement.learner_cpus, dsc.placement.sampler_cpus), want)
            for c in want:
                if c:
                    load[int(c)] += 1
            ws.append(w)
        # Two pipelines: two threads on each of their pins.
        masks = thread_masks()
        for w in ws:
            self.assertIn(w.placement.learner_cpus, masks)
            if w.placement.sampler_cpus:
                self.assertIn(w.placement.sampler_cpus, masks)
        want = (ws[0].placement.learner_cpus, ws[0].placement.sampler_cpus)
        self.assertEqual(self.ctl("plan", "cartpole_dqn").returncode, 0)
        r = self.ctl("describe", ws[0].id)
        self.assertIn(f"learner {want[0]}, sampler {want[1] or 'unpinned'}", r.stdout)
        j = json.loads(self.ctl("--json", "describe", ws[0].id).stdout)
        self.assertEqual((j["placement"]["learner_cpus"], j["placement"]["sampler_cpus"]), want)
        # Deleting a workload frees its CPUs for the next.
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=ws[0].id),
                                   metadata=((TOKEN_KEY, ws[0].token),), timeout=10)
        for c in want:
            if c:
                load[int(c)] -= 1
        nxt = expect()
        w = self.d.stub.RegisterWorkload(learner_spec(name="pin2"), timeout=30)
        self.assertEqual((w.placement.learner_cpus, w.placement.sampler_cpus), nxt)
        # A plan says where a registration now would pin, and pins nothing.
        plan = json.loads(self.ctl("--json", "plan", "cartpole_dqn").stdout)
        load[int(nxt[0])] += 1
        if nxt[1]:
            load[int(nxt[1])] += 1
        self.assertEqual((plan["learner_cpus"], plan["sampler_cpus"]),
                         expect())

    def test_measured_gps_after_training(self):
        w = self.d.stub.RegisterWorkload(learner_spec(batch=32), timeout=30)
        md = ((TOKEN_KEY, w.token),)
        import struct
        n = 256
        obs = b"".join(struct.pack("<4f", i, 0, 0, 0) for i in range(n))
        rb = pb.RowBatch(count=n, columns=[
            obs, b"".join(struct.pack("<i", i % 2) for i in range(n)),
            struct.pack(f"<{n}f", *([1.0] * n)), obs, struct.pack(f"<{n}f", *([0.99] * n))])
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rb), metadata=md,
                                timeout=10)
        self.d.stub.TrainStep(pb.TrainStepRequest(workload_id=w.id, steps=200), metadata=md,
                              timeout=60)
        dsc = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10)
        self.assertGreater(dsc.placement.measured_gps, 0)
        r = self.ctl("describe", w.id)
        self.assertIn("placement", r.stdout)
        self.assertIn("C-C-C", r.stdout)
        self.assertIn("prediction off by", r.stdout)
        j = json.loads(self.ctl("--json", "describe", w.id).stdout)
        self.assertEqual(j["placement"]["mapping"], "C-C-C")
        self.assertGreater(j["placement"]["measured_gps"], 0)

    def test_restart_keeps_profiles(self):
        w = self.d.stub.RegisterWorkload(learner_spec(batch=32), timeout=30)
        self.assertFalse(w.placement.profile_cache_hit)
        n = len(self.profiles())
        self.assertGreater(n, 0)
        self.assertEqual(self.d.stop(), 0)
        self.d = self.start()
        self.assertEqual(len(self.profiles()), n)
        # The restored workload has its placement back, from the store.
        dsc = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10)
        self.assertEqual(dsc.placement.mapping, "C-C-C")
        self.assertTrue(dsc.placement.profile_cache_hit)
        w2 = self.d.stub.RegisterWorkload(learner_spec(batch=32), timeout=30)
        self.assertTrue(w2.placement.profile_cache_hit)
        self.assertEqual(w2.placement.profiles_measured, 0)
        self.assertNotIn("profiles measured (miss)", "".join(self.d.lines))
        self.assertEqual(len(self.profiles()), n)


class TestProfiles(DseBase):
    def test_clear_export_import_round_trip(self):
        self.d.stub.RegisterWorkload(learner_spec(), timeout=30)
        before = self.profiles()
        self.assertGreater(len(before), 0)
        exp = self.d.stub.ExportProfiles(pb.ExportProfilesRequest(), metadata=self.admin(),
                                         timeout=10)
        self.assertEqual(exp.count, len(before))
        self.assertEqual(exp.jsonl.count(b"\n"), len(before))
        cl = self.d.stub.ClearProfiles(pb.ClearProfilesRequest(), metadata=self.admin(),
                                       timeout=10)
        self.assertEqual(cl.removed, len(before))
        self.assertEqual(self.profiles(), [])
        imp = self.d.stub.ImportProfiles(pb.ImportProfilesRequest(jsonl=exp.jsonl),
                                         metadata=self.admin(), timeout=10)
        self.assertEqual(imp.imported, len(before))
        after = self.profiles()
        key = lambda p: (p.device, p.primitive, p.threads, p.network, p.batch)  # noqa: E731
        self.assertEqual(sorted(map(key, after)), sorted(map(key, before)))
        self.assertTrue(all(p.source == "imported" for p in after))
        for a, b in zip(sorted(after, key=key), sorted(before, key=key)):
            self.assertEqual(a.latency_s, b.latency_s)
        # Imported profiles serve the next registration: nothing measured.
        w = self.d.stub.RegisterWorkload(learner_spec(), timeout=30)
        self.assertTrue(w.placement.profile_cache_hit)

    def test_replayctl_profiles(self):
        self.d.stub.RegisterWorkload(learner_spec(batch=16), timeout=30)
        r = self.ctl("profiles")
        self.assertIn("dqn:4-64-64-2", r.stdout)
        self.assertIn("train", r.stdout)
        exported = self.ctl("profiles", "export").stdout
        n = exported.count("\n")
        self.assertGreater(n, 0)
        path = os.path.join(self.state, "p.jsonl")
        with open(path, "w") as f:
            f.write(exported)
        self.assertIn(f"cleared {n} profiles", self.ctl("profiles", "--clear").stdout)
        self.assertEqual(json.loads(self.ctl("--json", "profiles").stdout)["profiles"], [])
        self.assertIn(f"imported {n} profiles", self.ctl("profiles", "import", path).stdout)
        self.assertEqual(len(json.loads(self.ctl("--json", "profiles").stdout)["profiles"]), n)
        # A malformed file: a clear error, nothing imported.
        with open(path, "a") as f:
            f.write("{not json}\n")
        self.ctl("profiles", "--clear")
        r = self.ctl("profiles", "import", path, ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        self.assertIn(f"line {n + 1}", r.stderr)
        self.assertEqual(self.profiles(), [])

    def test_admin_gating(self):
        for call, req in ((self.d.stub.ListProfiles, pb.ListProfilesRequest()),
                          (self.d.stub.ClearProfiles, pb.ClearProfilesRequest()),
                          (self.d.stub.ExportProfiles, pb.ExportProfilesRequest()),
                          (self.d.stub.ImportProfiles, pb.ImportProfilesRequest(jsonl=b""))):
            self.assert_code(grpc.StatusCode.UNAUTHENTICATED, call, req, timeout=10)
            self.assert_code(grpc.StatusCode.PERMISSION_DENIED, call, req,
                             metadata=((TOKEN_KEY, "0" * 64),), timeout=10)
        # A workload's own token is not the admin's.
        w = self.d.stub.RegisterWorkload(learner_spec(batch=16), timeout=30)
        n = len(self.profiles())
        self.assert_code(grpc.StatusCode.PERMISSION_DENIED, self.d.stub.ClearProfiles,
                         pb.ClearProfilesRequest(), metadata=((TOKEN_KEY, w.token),), timeout=10)
        self.assertEqual(len(self.profiles()), n)
        r = self.ctl("profiles", "--token", "wrong", ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("PERMISSION_DENIED", r.stderr)

    def test_bad_imports_change_nothing(self):
        self.d.stub.RegisterWorkload(learner_spec(batch=16), timeout=30)
        before = self.profiles()
        good = self.d.stub.ExportProfiles(pb.ExportProfilesRequest(), metadata=self.admin(),
                                          timeout=10).jsonl
        for bad, where in ((good + b'{"device":"cpu-00"}\n', "line"),
                           (b"garbage\n", "line 1"),
                           (good.replace(b'"latency_s":', b'"latency_s":-', 1), "line 1")):
            e = self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.d.stub.ImportProfiles,
                                 pb.ImportProfilesRequest(jsonl=bad), metadata=self.admin(),
                                 timeout=10)
            self.assertIn(where, e.details())
            self.assertEqual(len(self.profiles()), len(before))
        self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.d.stub.ImportProfiles,
                         pb.ImportProfilesRequest(jsonl=b"\n" * (17 << 20)),
                         metadata=self.admin(), timeout=30)


class TestPlan(DseBase):
    def test_plan_needs_the_admin_token(self):
        """Plan measures and stores: without the admin token it is refused
        before anything is profiled, and nothing is stored."""
        spec = learner_spec(batch=64, hidden=(48, 48))
        w = self.d.stub.RegisterWorkload(learner_spec(batch=32), timeout=30)
        before = len(self.profiles())
        self.assert_code(grpc.StatusCode.UNAUTHENTICATED, self.d.stub.Plan,
                         pb.PlanRequest(spec=spec), timeout=30)
        self.assert_code(grpc.StatusCode.PERMISSION_DENIED, self.d.stub.Plan,
                         pb.PlanRequest(spec=spec), metadata=((TOKEN_KEY, w.token),),
                         timeout=30)
        self.assertEqual(len(self.profiles()), before, "a refused plan stored profiles")
        self.assertTrue(self.plan(pb.PlanRequest(spec=spec), timeout=30).placement.mapping)
        self.assertGreater(len(self.profiles()), before)

    def test_plan_fpga_and_gpu(self):
        spec = learner_spec(batch=64)
        r = self.plan(pb.PlanRequest(spec=spec, fpga_part="u200"), timeout=30)
        p = r.placement
        self.assertEqual(p.table[2].device, "fpga")
        self.assertEqual(p.table[2].learner_source, "model")
        self.assertIn("u200", p.table[2].detail)
        self.assertIn("F", p.mapping)
        self.assertIn("FPGA backend not available", p.note)
        self.assertEqual(p.running, "C-C-C")
        # An assumed GPU: the CPU's own rows relabelled as a GPU 100x faster.
        exp = self.d.stub.ExportProfiles(pb.ExportProfilesRequest(), metadata=self.admin(),
                                         timeout=10).jsonl.decode()
        rows = []
        for line in exp.splitlines():
            o = json.loads(line)
            if o["network"] != "dqn:4-64-64-2" or o["batch"] != 64:
                continue
            o["device"] = "gpu-0123456789abcdef"
            o["latency_s"] = max(o["latency_s"] / 100, 1e-9)  # profile.h's floor
            rows.append(json.dumps(o))
        self.assertTrue(rows)
        gpu = ("\n".join(rows) + "\n").encode()
        r = self.plan(pb.PlanRequest(spec=spec, gpu_profiles=gpu), timeout=30)
        p = r.placement
        self.assertTrue(p.mapping.startswith("G-"), p.mapping)
        self.assertEqual(p.table[1].learner_source, "assumed")
        self.assertIn("GPU backend not available", p.note)
        self.assertTrue(p.profile_cache_hit)  # the CPU's rows from the first plan
        self.assertEqual(self.workload_count(), 0)  # a plan registers nothing
        # replayctl plan with both assumptions.
        path = os.path.join(self.state, "gpu.jsonl")
        with open(path, "wb") as f:
            f.write(gpu)
        out = self.ctl("plan", "cartpole_dqn,capacity=10000", "--assume", f"gpu={path}", "--assume",
                       "fpga=u200").stdout
        self.assertIn("mapping", out)
        self.assertIn("fpga-u200", out)
        j = json.loads(self.ctl("--json", "plan", "hopper_ddpg,batch=256", "--assume",
                                "fpga=u250").stdout)
        self.assertEqual([t["device"] for t in j["table"]], ["cpu", "gpu", "fpga"])
        self.assertEqual(self.workload_count(), 0)

    def test_bad_plans_change_nothing(self):
        spec = learner_spec()
        n = len(self.profiles())
        e = self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.plan,
                             pb.PlanRequest(spec=spec, fpga_part="u999"), timeout=10)
        self.assertIn("u999", e.details())
        e = self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.plan,
                             pb.PlanRequest(spec=spec, fpga_part="../etc/passwd"), timeout=10)
        self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.plan,
                         pb.PlanRequest(spec=spec, gpu_profiles=b"{oops\n"), timeout=10)
        other = ('{"device":"gpu-0123456789abcdef","primitive":"train","threads":1,"batch":8,'
                 '"capacity":100,"fanout":16,"algorithm":"dqn","network":"dqn:4-8-2",'
                 '"build":"x","latency_s":1e-05,"reps":1,"items":0,"source":"measured",'
                 '"measured_unix":1}\n').encode()
        e = self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.plan,
                             pb.PlanRequest(spec=spec, gpu_profiles=other), timeout=10)
        self.assertIn("no row for this workload's shape", e.details())
        cpu = other.replace(b'"gpu-', b'"cpu-')
        e = self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.plan,
                             pb.PlanRequest(spec=spec, gpu_profiles=cpu), timeout=10)
        self.assertIn("not a GPU", e.details())
        self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.plan,
                         pb.PlanRequest(spec=spec, gpu_profiles=b" " * (2 << 20)), timeout=10)
        plain = learner_spec()
        plain.ClearField("learner")
        self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.plan,
                         pb.PlanRequest(spec=plain), timeout=10)
        self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.plan,
                         pb.PlanRequest(), timeout=10)
        # Nothing was measured, stored or registered by any of them.
        self.assertEqual(len(self.profiles()), n)
        self.assertEqual(self.workload_count(), 0)
        r = self.ctl("plan", "cartpole_dqn", "--assume", "fpga=nosuch", ok=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("nosuch", r.stderr)
        r = self.ctl("plan", "bogus_shape", ok=False)
        self.assertEqual(r.returncode, 2)
        r = self.ctl("plan", "cartpole_dqn", "--assume", "tpu=x", ok=False)
        self.assertEqual(r.returncode, 2)


class TestDevices(DseBase):
    def test_list_devices(self):
        r = self.d.stub.ListDevices(pb.ListDevicesRequest(), timeout=10)
        cpu = [d for d in r.devices if d.kind == "cpu"]
        self.assertEqual(len(cpu), 1)
        self.assertIn("learner", cpu[0].capabilities)
        self.assertGreater(cpu[0].cores, 0)
        self.assertTrue(cpu[0].fingerprint.startswith("cpu-"))
        out = self.ctl("devices").stdout
        self.assertIn("RUNS", out)
        self.assertIn(cpu[0].fingerprint, out)
        j = json.loads(self.ctl("--json", "devices").stdout)
        self.assertEqual(j["devices"][0]["capabilities"], cpu[0].capabilities)


if __name__ == "__main__":
    unittest.main(verbosity=2)
