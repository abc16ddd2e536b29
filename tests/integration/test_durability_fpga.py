#!/usr/bin/python3
"""Durability of a hosted learner on the C-simulated FPGA (issue 22):
`replayd --fpga-csim u250`, a DQN workload mapped F-F-F. A checkpoint
holds the FPGA learner's whole training state (learner_full), and after a
kill -9 the restored learner trains on exactly like a twin that was never
restarted: the same loss and the same weights.

usage: test_durability_fpga.py REPLAYD_EXE PROTO_DIR FPGA_PARTS_DIR
"""
import os
import sys

PARTS = os.path.abspath(sys.argv.pop(3))
# test_fpga_csim takes REPLAYCTL_EXE and FPGA_PARTS_DIR off argv at import.
sys.argv[3:3] = ["replayctl-unused", PARTS]

from test_fpga_csim import csim_spec, row_batch  # noqa: E402  (it imports replayd_test)
from replayd_test import Daemon, pb  # noqa: E402
import test_durability as td  # noqa: E402


class TestFpgaLearnerState(td.Base):
    def start(self, *extra):
        self.d = Daemon(self.state, "--fpga-parts-dir", PARTS, "--fpga-csim", "u250", *extra)
        return self.d

    def train(self, w, steps):
        return self.d.stub.TrainStep(pb.TrainStepRequest(workload_id=w.id, steps=steps),
                                     metadata=self.md(w), timeout=300)

    def weights(self, w):
        return self.d.stub.GetWeights(pb.GetWeightsRequest(workload_id=w.id),
                                      metadata=self.md(w), timeout=10)

    def test_restored_fpga_learner_trains_on_like_its_twin(self):
        self.start()
        w = self.d.stub.RegisterWorkload(csim_spec(), timeout=120)
        twin = self.d.stub.RegisterWorkload(csim_spec(), timeout=120)
        for x in (w, twin):
            self.assertEqual(x.placement.running[:1], "F", x.placement.note)
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=x.id, rows=row_batch(600)),
                                    metadata=self.md(x), timeout=10)
        self.train(w, 40)
        self.train(twin, 40)
        g1 = self.weights(w)
        self.assertTrue(self.checkpoint(w).checkpoints[0].learner_full,
                        "the FPGA learner's checkpoint holds its policy only")
        tt = self.train(twin, 15)
        gt = self.weights(twin)
        self.restart()
        self.assertEqual(self.describe(w).placement.running[:1], "F")
        self.assertEqual(self.describe(w).learner.steps, 40)
        g2 = self.weights(w)
        self.assertEqual(g2.weights, g1.weights, "the restored learner has other weights")
        self.assertGreater(g2.version, g1.version, "weight versions went back")
        t2 = self.train(w, 15)
        # Targets, Adam's moments and the step count came back: the twin's
        # loss and weights, exactly.
        self.assertEqual(t2.loss_mean, tt.loss_mean)
        self.assertEqual(self.weights(w).weights, gt.weights)


if __name__ == "__main__":
    import unittest
    unittest.main(verbosity=2)
