#!/usr/bin/python3
"""Re-mapping the live set and moving workloads live (issue 24 item 4),
against the real replayd started with `--fpga-csim u250` (the FPGA run as
C-simulation: the only FPGA here; no GPU is present, so no GPU move runs).

- A workload registered while a heavier tenant's workload occupies the FPGA
  is placed beside it on the CPU; once that one is deleted it moves, live,
  to the FPGA. Its table and learner move exactly: the samples after the
  move are those a CPU-only daemon, given the same calls and never moving,
  draws; its weights and step count are those before the move; training
  goes on, on the FPGA. `replayctl describe` (and --json) show the history.
- Two workloads coming and going four times never move the long-lived
  one: the hysteresis keeps it (and says so); with the threshold at 0 the
  same cycles do move it (the control: the test can fail). The CPU's
  profiles are scaled first, so that the gain the hysteresis weighs is the
  same on every machine.

usage: test_remap.py REPLAYD_EXE PROTO_DIR REPLAYCTL_EXE FPGA_PARTS_DIR
"""
import json
import os
import shutil
import sys
import tempfile
import time
import unittest

REPLAYCTL = os.path.abspath(sys.argv[3])
PARTS = os.path.abspath(sys.argv[4])
del sys.argv[3:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from replayd_test import TOKEN_KEY, Daemon, DaemonCase, dqn_spec, pb  # noqa: E402
from replayd_test import dqn_rows as row_batch, spread_priorities as priorities  # noqa: E402

DEADLINE = 120  # seconds to wait for a re-mapping on a loaded CI machine


class RemapBase(DaemonCase):
    replayctl = REPLAYCTL
    threshold = None

    def daemon_args(self):
        a = ["--fpga-parts-dir", PARTS, "--fpga-csim", "u250"]
        if self.threshold is not None:
            a += ["--remap-threshold-pct", str(self.threshold)]
        return a

    def tenant(self, name, weight):
        t = self.d.stub.AddTenant(pb.AddTenantRequest(name=name, quota=pb.TenantQuota(
            weight=weight)), metadata=self.admin(), timeout=10)
        return ((TOKEN_KEY, t.token),)

    def register(self, md, name, seed=3):
        return self.d.stub.RegisterWorkload(dqn_spec(name=name, seed=seed), metadata=md,
                                            timeout=120)

    def charged(self, tenant):
        """(memory, GPU memory) the tenant is charged now."""
        ts = self.d.stub.ListTenants(pb.ListTenantsRequest(), metadata=self.admin(),
                                     timeout=10).tenants
        t = [t for t in ts if t.name == tenant]
        self.assertEqual(len(t), 1, [t.name for t in ts])
        return t[0].memory_bytes, t[0].gpu_memory_bytes

    def placement(self, w):
        return self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), metadata=self.admin(),
                                            timeout=10).placement

    def wait_history(self, w, pred, what):
        """The placement once pred(history) holds (a re-mapping runs on its
        own queue after the call that caused it has returned)."""
        end = time.monotonic() + DEADLINE
        while True:
            p = self.placement(w)
            if pred(list(p.history)):
                return p
            if time.monotonic() > end:
                self.fail(f"{what}: history {[e.reason for e in p.history]}")
            time.sleep(0.05)


class TestMoveAfterDelete(RemapBase):
    def test_placed_beside_then_moved_exactly(self):
        # The newcomer is the default tenant's (weight 1): replayctl
        # describe, without a token, sees it.
        big, small = self.tenant("big", 1000), ()
        a = self.register(big, "occupant")
        self.wait_history(a, lambda h: len(h) == 1, "the occupant's placement")
        self.assertEqual(self.placement(a).running, "F-F-F")
        # A 1/1001 share of the FPGA predicts less than the CPU alone: the
        # newcomer is placed beside the occupant, its learner on the CPU.
        b = self.register(small, "newcomer", seed=5)
        p = self.wait_history(b, lambda h: len(h) == 1, "the newcomer's placement")
        ev = p.history[0]
        self.assertIn('registered (register of "newcomer"', ev.reason)
        self.assertIn("placed beside 1 other", ev.reason)
        self.assertEqual(p.running[0], "C", p.note)
        self.assertTrue(ev.moved and getattr(ev, "from") == "F-F-F" and ev.to == p.running, ev)
        self.assertEqual(len(self.placement(a).history), 1)  # the occupant did not move
        on_fpga, on_cpu = self.charged("big"), self.charged("default")
        # Placed F-F-F at registration and moved to the CPU by the set's
        # re-mapping, it is charged for what it holds on the CPU.
        self.assertLess(on_cpu[0], on_fpga[0])

        # The same calls on a CPU-only daemon: the reference that never moves.
        ref_state = tempfile.mkdtemp(prefix="replayd-remap-ref-")
        ref = Daemon(ref_state, "--fpga-parts-dir", PARTS)
        try:
            r = ref.stub.RegisterWorkload(dqn_spec(name="newcomer", seed=5), timeout=120)
            self.assertEqual(r.placement.running, "C-C-C")
            both = ((self.d.stub, b.id, ((TOKEN_KEY, b.token),)),
                    (ref.stub, r.id, ((TOKEN_KEY, r.token),)))
            for stub, wid, md in both:
                for start in (0, 600):
                    stub.InsertBatch(pb.InsertRequest(workload_id=wid, rows=row_batch(600, start),
                                                      priorities=priorities(600, start)),
                                     metadata=md, timeout=30)
                stub.UpdatePriorities(pb.UpdatePrioritiesRequest(
                    workload_id=wid, keys=list(range(100, 400)), priorities=[0.5] * 300),
                    metadata=md, timeout=30)
                t = stub.TrainStep(pb.TrainStepRequest(workload_id=wid, steps=40), metadata=md,
                                   timeout=120)
                self.assertEqual(t.steps_done, 40)
            s0 = [stub.Sample(pb.SampleRequest(workload_id=wid, batch_size=256, beta=0.4),
                              metadata=md, timeout=30) for stub, wid, md in both]
            self.assertEqual(list(s0[0].keys), list(s0[1].keys))
            w0 = [stub.GetWeights(pb.GetWeightsRequest(workload_id=wid, have_version=0),
                                  metadata=md, timeout=10) for stub, wid, md in both]
            self.assertEqual(w0[0].weights, w0[1].weights)  # both trained on the CPU so far

            # The occupant goes: the newcomer moves to the FPGA, live.
            self.d.stub.DeleteWorkload(pb.WorkloadRef(id=a.id), metadata=self.admin(),
                                       timeout=30)
            p = self.wait_history(b, lambda h: len(h) == 2, "the move after the delete")
            ev = p.history[1]
            self.assertTrue(ev.moved, ev)
            self.assertEqual((getattr(ev, "from"), ev.to), (p.history[0].to, "F-F-F"))
            self.assertIn('re-mapped after delete of "occupant"', ev.reason)
            self.assertGreater(ev.predicted_total_to, ev.predicted_total_from * 1.1)
            self.assertEqual(p.running, "F-F-F")
            self.assertIn("C-simulation", p.note)
            # It is charged for what it holds now: the same as the
            # occupant was for the same spec on the same modules.
            self.assertEqual(self.charged("default"), on_fpga)
            self.assertEqual(self.charged("big"), (0, 0))

            # Nothing was lost: weights and version as before, the table's
            # rows, priorities and sampling stream as the reference's.
            md = both[0][2]
            w1 = self.d.stub.GetWeights(pb.GetWeightsRequest(workload_id=b.id, have_version=0),
                                        metadata=md, timeout=10)
            self.assertEqual((w1.version, w1.weights), (w0[0].version, w0[0].weights))
            d = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=b.id), metadata=md, timeout=10)
            dr = ref.stub.DescribeWorkload(pb.WorkloadRef(id=r.id), metadata=both[1][2],
                                           timeout=10)
            self.assertEqual(d.counters.size, dr.counters.size)
            self.assertEqual(d.counters.inserts, dr.counters.inserts)
            self.assertEqual(d.learner.steps, 40)
            for stratified in (False, True):
                s = [stub.Sample(pb.SampleRequest(workload_id=wid, batch_size=1000, beta=0.4,
                                                  stratified=stratified),
                                 metadata=m, timeout=30) for stub, wid, m in both]
                self.assertEqual(list(s[0].keys), list(s[1].keys))
                self.assertEqual(list(s[0].probabilities), list(s[1].probabilities))
                self.assertEqual(list(s[0].weights), list(s[1].weights))
                self.assertEqual(list(s[0].rows.columns), list(s[1].rows.columns))
            # Training goes on, on the C-simulated FPGA learner.
            t = self.d.stub.TrainStep(pb.TrainStepRequest(workload_id=b.id, steps=20),
                                      metadata=md, timeout=120)
            self.assertEqual(t.steps_done, 20)
            self.assertGreater(t.weight_version, w0[0].version)
            d = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=b.id), metadata=md, timeout=10)
            self.assertEqual(d.learner.steps, 60)
            self.assertEqual(d.placement.running, "F-F-F")
        finally:
            self.assertEqual(ref.stop(), 0)
            shutil.rmtree(ref_state, ignore_errors=True)

        # replayctl describe: the history, in text and JSON.
        out = self.ctl("describe", b.id).stdout
        self.assertIn("history", out)
        self.assertIn("-> F-F-F", out)
        self.assertIn('re-mapped after delete of "occupant"', out)
        j = json.loads(self.ctl("describe", b.id, "--json").stdout)
        hist = j["placement"]["history"]
        self.assertEqual(len(hist), 2)
        self.assertEqual(hist[1]["to"], "F-F-F")
        self.assertTrue(hist[1]["moved"])
        self.assertGreater(hist[1]["predicted_total_to"], hist[1]["predicted_total_from"])
        self.assertEqual(j["placement"]["history_total"], 2)


class TestMoveOverQuota(RemapBase):
    def test_growth_past_the_quota_is_not_moved(self):
        # The same arrival and departure, the newcomer's tenant allowed no
        # more memory than it holds on the CPU: the move, which would hold
        # more on the FPGA's modules, is not made, and the history says why.
        big, tight = self.tenant("big", 1000), self.tenant("tight", 1)
        a = self.register(big, "occupant")
        self.wait_history(a, lambda h: len(h) == 1, "the occupant's placement")
        b = self.register(tight, "newcomer", seed=5)
        p = self.wait_history(b, lambda h: len(h) == 1, "the newcomer's placement")
        before = p.running
        self.assertEqual(before[0], "C", p.note)
        held = self.charged("tight")
        self.d.stub.SetTenant(pb.SetTenantRequest(name="tight", max_memory_bytes=held[0]),
                              metadata=self.admin(), timeout=10)
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=a.id), metadata=self.admin(), timeout=30)
        p = self.wait_history(b, lambda h: len(h) == 2, "the refused move")
        ev = p.history[1]
        self.assertFalse(ev.moved, ev)
        self.assertIn("not moved", ev.reason)
        self.assertIn('tenant "tight"', ev.reason)
        self.assertIn("max_memory_bytes", ev.reason)
        self.assertEqual(p.running, before)
        self.assertEqual(self.charged("tight"), held)
        # The workload works on where it is.
        md = ((TOKEN_KEY, b.token),)
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=b.id, rows=row_batch(64, 0),
                                                 priorities=priorities(64, 0)),
                                metadata=md, timeout=30)
        t = self.d.stub.TrainStep(pb.TrainStepRequest(workload_id=b.id, steps=2), metadata=md,
                                  timeout=120)
        self.assertEqual(t.steps_done, 2)


class StabilityBase(RemapBase):
    # The CPU's predicted GPS for the shape, as a fraction of the FPGA's, at
    # most: a CPU measured faster is slowed to it (made faster, its replay
    # module could beat the FPGA's and the light workload would map F-C-F).
    # Machines measured 2.8% to 10.5% in release builds, and an ASan build
    # on a Zen 3 VM less than 2%: such a CPU keeps its own share, since
    # scaling its profiles up to 2% would also take its shortest latencies
    # below what ImportProfiles accepts (1e-9 s). Any share below the 10%
    # threshold serves the tests; cpu_share holds the one pinned.
    CPU_SHARE = 0.02

    def pin_cpu_figures(self):
        """Make the gain of moving the light workload to the CPU small and
        known on every machine. That gain is the CPU's predicted GPS over
        the FPGA's (the FPGA's total stays the same whether it is shared or
        not). The FPGA's figure comes from its model; the CPU's is measured,
        and machines differ (above). So the CPU's measured profiles are
        scaled to at most CPU_SHARE of the FPGA's GPS (cpu_share) and
        imported in their place. The GPS is inverse to the latencies, so
        the plan after the import must show that share."""
        spec = dqn_spec(name="long-lived")

        def plan(**kw):
            return self.d.stub.Plan(pb.PlanRequest(spec=spec, **kw), metadata=self.admin(),
                                    timeout=120).placement
        fpga, cpu = plan(), plan(ignore_present=True)
        self.assertEqual((fpga.running, cpu.mapping), ("F-F-F", "C-C-C"))
        measured = cpu.predicted_gps / fpga.predicted_gps
        self.assertGreater(measured, 0)
        self.cpu_share = min(self.CPU_SHARE, measured)
        scale = measured / self.cpu_share  # >= 1: latencies only grow
        lines = []
        for line in self.d.stub.ExportProfiles(pb.ExportProfilesRequest(), metadata=self.admin(),
                                               timeout=30).jsonl.decode().splitlines():
            p = json.loads(line)
            if p["device"].startswith("cpu-"):
                p["latency_s"] *= scale
            lines.append(json.dumps(p))
        self.d.stub.ClearProfiles(pb.ClearProfilesRequest(), metadata=self.admin(), timeout=30)
        self.d.stub.ImportProfiles(pb.ImportProfilesRequest(jsonl="\n".join(lines).encode()),
                                   metadata=self.admin(), timeout=30)
        now = plan(ignore_present=True)
        self.assertEqual(now.profiles_measured, 0)
        self.assertAlmostEqual(now.predicted_gps / fpga.predicted_gps, self.cpu_share, places=6)
        self.assertEqual(plan().running, "F-F-F")

    def cycles(self, n=4):
        """A light workload lives through n arrivals and departures of a
        heavy one: its history."""
        self.pin_cpu_figures()
        light, heavy = self.tenant("light", 1), self.tenant("heavy", 1000)
        w = self.register(light, "long-lived")
        self.wait_history(w, lambda h: len(h) == 1, "the long-lived placement")
        self.assertEqual(self.placement(w).running, "F-F-F")
        done = 1
        for i in range(n):
            x = self.register(heavy, f"visitor-{i}")
            self.wait_history(x, lambda h: len(h) >= 1, "the visitor's placement")
            self.d.stub.DeleteWorkload(pb.WorkloadRef(id=x.id), metadata=self.admin(),
                                       timeout=30)
            done += 2
        # Every kick handled: wait until the server's re-mapping queue is idle.
        end = time.monotonic() + DEADLINE
        while True:
            m = self.placement(w)
            h = list(m.history)
            if self.settled(h, n):
                return w, h
            if time.monotonic() > end:
                self.fail(f"not settled: {[e.reason for e in h]}")
            time.sleep(0.05)


class TestNoOscillation(StabilityBase):
    def settled(self, h, n):
        # One "kept" per arrival (the visitor shares the FPGA 1000:1; moving
        # the long-lived one to the CPU gains less than the threshold).
        return sum("kept (hysteresis)" in e.reason for e in h) >= n

    def test_long_lived_never_moves(self):
        w, h = self.cycles()
        self.assertFalse([e for e in h if e.moved], [e.reason for e in h])
        self.assertEqual(self.placement(w).running, "F-F-F")
        kept = [e for e in h if "kept (hysteresis)" in e.reason]
        self.assertIn("not more than the 10% threshold", kept[0].reason)
        # The gain refused is the CPU's share the test pinned.
        gain = kept[0].predicted_total_to / kept[0].predicted_total_from - 1
        self.assertAlmostEqual(gain, self.cpu_share, delta=0.002)


class TestThresholdZeroMoves(StabilityBase):
    threshold = 0

    def settled(self, h, n):
        return sum(e.moved for e in h) >= 2 * n

    def test_without_hysteresis_it_moves(self):
        # The control: the same cycles with no threshold move it away from
        # the FPGA on every arrival and back on every departure.
        w, h = self.cycles()
        moves = [(getattr(e, "from"), e.to) for e in h if e.moved]
        self.assertEqual(len(moves), 8, moves)
        self.assertEqual(moves[-1][1], "F-F-F")


if __name__ == "__main__":
    unittest.main()
