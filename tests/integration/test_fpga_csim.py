#!/usr/bin/python3
"""The FPGA C-simulation device end to end (issue 7), against the real
replayd on an ephemeral loopback port started with `--fpga-csim u250`:
ListDevices and `replayctl devices` label it as C-simulation with no board;
a small DQN workload maps F-F-F (papers/001 Table V: small networks go all
FPGA) and runs its replay module on the C-simulated kernel; rows are
inserted, sampled (the same keys, probabilities and weights as a CPU-only
daemon with the same seed), trained on and their weights fetched; what runs
is reported honestly: F-F-F, the learner on the C-simulated FPGA too (a
fall-back to the CPU learner fails the test). Bad settings stop the daemon
at start.

usage: test_fpga_csim.py REPLAYD_EXE PROTO_DIR REPLAYCTL_EXE FPGA_PARTS_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPLAYCTL = os.path.abspath(sys.argv[3])
PARTS = os.path.abspath(sys.argv[4])
del sys.argv[3:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import REPLAYD, TOKEN_KEY, Daemon, DaemonCase, dqn_spec, pb  # noqa: E402
from replayd_test import dqn_rows as row_batch, spread_priorities as priorities  # noqa: E402


def csim_spec(capacity=10000, seed=3):
    return dqn_spec(name="dqn-csim", capacity=capacity, seed=seed)


class FpgaCsimBase(DaemonCase):
    extra = ("--fpga-csim", "u250")
    replayctl = REPLAYCTL

    def daemon_args(self):
        return ("--fpga-parts-dir", PARTS, *self.extra)

    def ctl(self, *args):
        return DaemonCase.ctl(self, *args, deadline=30).stdout

    def fpga_devices(self):
        r = self.d.stub.ListDevices(pb.ListDevicesRequest(), timeout=10)
        return [d for d in r.devices if d.kind == "fpga"]


class TestCsimDevice(FpgaCsimBase):
    def test_listed_as_csimulation(self):
        fpgas = self.fpga_devices()
        csim = [d for d in fpgas if d.isa == "csim"]
        self.assertEqual(len(csim), 1, fpgas)
        d = csim[0]
        self.assertEqual(d.model, "u250")
        self.assertTrue(d.status.startswith("ok: C-simulation (no board)"), d.status)
        self.assertIn("C-simulation", d.capabilities)
        self.assertIn("C-simulation (no board)", d.name)
        self.assertEqual(d.memory_bytes, 0)  # its storage is host memory
        self.assertEqual(d.cores, 4)  # the U250's SLRs
        self.assertTrue(d.fingerprint.startswith("fpga-"))
        self.assertNotEqual(d.fingerprint, "fpga-u250")  # not an assumed part's label
        out = self.ctl("devices")
        self.assertIn("C-simulation (no board)", out)
        self.assertIn("csim", out)
        self.assertIn(d.fingerprint, out)
        j = json.loads(self.ctl("--json", "devices"))
        jf = [x for x in j["devices"] if x["kind"] == "fpga"]
        self.assertEqual(jf[0]["isa"], "csim")
        self.assertIn("C-simulation", jf[0]["status"])
        self.assertIn("C-simulation (no board)", self.ctl("status"))
        log = self.d.log_after("u250 C-simulation (no board)")
        self.assertIn("u250 C-simulation (no board)", log)


class TestCsimWorkload(FpgaCsimBase):
    def test_fff_end_to_end(self):
        w = self.d.stub.RegisterWorkload(csim_spec(), timeout=60)
        md = ((TOKEN_KEY, w.token),)
        p = w.placement
        self.assertEqual(p.mapping, "F-F-F", p.explain)
        self.assertEqual((p.learner_device, p.rmm_device, p.storage_device),
                         ("fpga", "fpga", "fpga"))
        fpga_row = p.table[2]
        self.assertEqual(fpga_row.device, "fpga")
        self.assertEqual(fpga_row.rmm_source, "model")
        self.assertIn("C-simulated u250", fpga_row.detail)
        csim = [d for d in self.d.stub.ListDevices(pb.ListDevicesRequest(), timeout=10).devices
                if d.isa == "csim"][0]
        self.assertEqual(fpga_row.fingerprint, csim.fingerprint)
        # The learner, the replay module and the storage all run on the
        # C-simulated FPGA (a fall-back of the learner to the CPU is a failure).
        self.assertEqual(p.running, "F-F-F", p.note)
        self.assertTrue(p.note.startswith("mapped F-F-F; running F-F-F (FPGA: C-simulation"),
                        p.note)
        self.assertIn("C-simulation of u250, no board", p.note)
        self.assertIn("storage is host memory", p.note)
        self.assertNotIn("CPU learner", p.note)
        want = (f"registered workload {w.id} (\"dqn-csim\", capacity 10000, 5 fields, "
                "replay module fpga-csim)")
        self.assertIn(want, self.d.log_after(want))

        # A CPU-only daemon, same spec and rows: the C-simulated replay
        # module samples exactly what the CPU sum tree does.
        cpu_state = tempfile.mkdtemp(prefix="replayd-fpga-cpu-")
        cpu = Daemon(cpu_state, "--fpga-parts-dir", PARTS)
        try:
            wc = cpu.stub.RegisterWorkload(csim_spec(), timeout=60)
            self.assertEqual(wc.placement.running, "C-C-C")
            self.assertIn("replay module cpu)", cpu.log_after("replay module cpu)"))
            mdc = ((TOKEN_KEY, wc.token),)
            for start in (0, 700):
                for stub, wid, m in ((self.d.stub, w.id, md), (cpu.stub, wc.id, mdc)):
                    r = stub.InsertBatch(pb.InsertRequest(
                        workload_id=wid, rows=row_batch(700, start),
                        priorities=priorities(700, start)), metadata=m, timeout=30)
                    self.assertEqual(r.inserted, 700)
            for stratified in (False, True):
                a = self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=1200,
                                                        beta=0.4, stratified=stratified),
                                       metadata=md, timeout=30)
                b = cpu.stub.Sample(pb.SampleRequest(workload_id=wc.id, batch_size=1200,
                                                     beta=0.4, stratified=stratified),
                                    metadata=mdc, timeout=30)
                self.assertEqual(list(a.keys), list(b.keys))
                self.assertEqual(list(a.probabilities), list(b.probabilities))
                self.assertEqual(list(a.weights), list(b.weights))
                self.assertEqual(a.rows.columns, b.rows.columns)
            keys = list(a.keys[:500])
            new = [k % 13 * 0.5 for k in keys]
            for stub, wid, m in ((self.d.stub, w.id, md), (cpu.stub, wc.id, mdc)):
                u = stub.UpdatePriorities(pb.UpdatePrioritiesRequest(
                    workload_id=wid, keys=keys, priorities=new), metadata=m, timeout=30)
                self.assertEqual(u.applied, 500)
            a = self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=64),
                                   metadata=md, timeout=30)
            b = cpu.stub.Sample(pb.SampleRequest(workload_id=wc.id, batch_size=64),
                                metadata=mdc, timeout=30)
            self.assertEqual(list(a.keys), list(b.keys))
            self.assertEqual(list(a.probabilities), list(b.probabilities))
        finally:
            self.assertEqual(cpu.stop(), 0)
            shutil.rmtree(cpu_state, ignore_errors=True)

        # Train: the pipeline samples and writes priorities back through the
        # C-simulated replay module.
        before = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10).counters
        t = self.d.stub.TrainStep(pb.TrainStepRequest(workload_id=w.id, steps=50), metadata=md,
                                  timeout=120)
        self.assertEqual(t.steps_done, 50)
        self.assertGreater(t.weight_version, 1)
        dsc = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10)
        self.assertEqual(dsc.learner.steps, 50)
        self.assertGreaterEqual(dsc.counters.samples - before.samples, 50 * 32)
        self.assertGreater(dsc.counters.updates, before.updates)
        self.assertEqual(dsc.placement.running, p.running)
        self.assertIn("C-simulation of u250", dsc.placement.note)
        g = self.d.stub.GetWeights(pb.GetWeightsRequest(workload_id=w.id, have_version=0),
                                   metadata=md, timeout=10)
        self.assertEqual(g.version, t.weight_version)
        self.assertTrue(g.weights.startswith(b"RDNN"))
        out = self.ctl("describe", w.id)
        self.assertIn("F-F-F", out)
        self.assertIn("C-simulation of u250", out)
        # The device list still says what the device is, whatever its status.
        self.assertIn("C-simulation", self.ctl("devices"))
        # A restart with the same setting places the restored workload on
        # the C-simulation FPGA again (from stored profiles: nothing is
        # measured at start), with its table restored from the checkpoint
        # the SIGTERM drain took (core/durable.h).
        size = dsc.counters.size
        self.assertGreater(size, 0)
        self.assertEqual(self.d.stop(), 0)
        self.d = Daemon(self.state, "--fpga-parts-dir", PARTS, *self.extra)
        dsc = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id), timeout=10)
        self.assertEqual(dsc.placement.mapping, "F-F-F")
        self.assertEqual(dsc.placement.running, "F-F-F", dsc.placement.note)
        self.assertIn("C-simulation of u250", dsc.placement.note)
        self.assertEqual(dsc.counters.size, size)
        r = self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=row_batch(100),
                                                     priorities=priorities(100)),
                                    metadata=md, timeout=30)
        self.assertEqual(r.inserted, 100)
        s = self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=16), metadata=md,
                               timeout=30)
        self.assertEqual(len(s.keys), 16)

    def test_capacity_above_the_build(self):
        # 2^20 + 1 items: no built kernel holds the tree, so the mapper keeps
        # the RMM on the CPU and says why.
        w = self.d.stub.RegisterWorkload(csim_spec(capacity=(1 << 20) + 1), timeout=60)
        p = w.placement
        self.assertNotEqual(p.rmm_device, "fpga")
        self.assertEqual(p.table[2].rmm_source, "-")
        self.assertIn("above the C-simulation build's largest tree", p.table[2].detail)
        self.assertEqual(p.running[2], "C")


class TestBadSettings(unittest.TestCase):
    def run_daemon(self, *args):
        state = tempfile.mkdtemp(prefix="replayd-fpga-bad-")
        try:
            return subprocess.run([REPLAYD, "--listen", "127.0.0.1:0", "--state-dir", state,
                                   "--fpga-parts-dir", PARTS, *args],
                                  capture_output=True, text=True, timeout=30)
        finally:
            shutil.rmtree(state, ignore_errors=True)

    def test_unknown_part(self):
        r = self.run_daemon("--fpga-csim", "u999")
        self.assertEqual(r.returncode, 2)
        self.assertIn("fpga-csim = u999: no FPGA part 'u999'", r.stderr)
        self.assertIn("u250", r.stderr)  # says which parts there are

    def test_malformed_part(self):
        r = self.run_daemon("--fpga-csim", "../etc/passwd")
        self.assertEqual(r.returncode, 2)
        self.assertIn("must be lower-case letters", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
