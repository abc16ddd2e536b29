#!/usr/bin/python3
"""Durability under a generic I/O error (issue 22): the storage under the
checkpoint directory fails with EIO (not ENOSPC, EROFS or EACCES). A
journal-mode insert whose fdatasync fails is not acknowledged, a failing
checkpoint is reported and the previous one kept, the daemon keeps
serving, and nothing acknowledged is lost across a kill -9.

The EIO comes from tests/support/eio_shim.c, preloaded into the daemon
(that file says why not from a failing device on this machine): while a
flag file exists, fsync and fdatasync under the checkpoint directory fail
with EIO, and with 'w' in the flag, write and pwrite too.

usage: test_durability_eio.py REPLAYD_EXE PROTO_DIR EIO_SHIM_SO
"""
import os
import sys

SHIM = os.path.abspath(sys.argv.pop(3))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from replayd_test import Daemon, pb, grpc, cartpole_spec, rows  # noqa: E402
import test_durability as td  # noqa: E402  (parse_ckpt, ident_rows, the Base case)

INTERNAL_OR_UNAVAILABLE = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNAVAILABLE}


class TestEIO(td.Base):
    def start(self, *extra):
        self.ck = os.path.join(self.state, "checkpoints")
        self.flag = os.path.join(self.state, "eio")
        env = dict(os.environ, LD_PRELOAD=SHIM, RD_EIO_PREFIX=self.ck, RD_EIO_FLAG=self.flag,
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
        self.d = Daemon(self.state, *extra, env=env)
        return self.d

    def eio(self, on, writes=False):
        if on:
            with open(self.flag, "w") as f:
                f.write("w" if writes else "s")
        elif os.path.exists(self.flag):
            os.unlink(self.flag)

    def insert(self, w, acked, seq, n=50):
        """One acknowledged InsertBatch of identifiable rows, recorded."""
        rb = td.ident_rows(1, seq, n)
        prio = [0.5 * (i % 8 + 1) for i in range(n)]
        r = self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rb, priorities=prio),
                                    metadata=self.md(w), timeout=10)
        for i, k in enumerate(r.keys):
            acked[k] = (td.row_of(rb, i), prio[i])

    def refused(self, w, seq):
        """An InsertBatch that must not be acknowledged: its status."""
        with self.assertRaises(grpc.RpcError) as cm:
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id,
                                                     rows=td.ident_rows(2, seq, 10)),
                                    metadata=self.md(w), timeout=10)
        self.assertIn(cm.exception.code(), INTERNAL_OR_UNAVAILABLE, cm.exception.details())
        return cm.exception.details()

    def verify(self, w, acked):
        td.TestKill9.verify(self, w, acked)

    def check_failure(self, w, other, acked, writes):
        # A journal-mode insert whose record cannot be made durable: never OK.
        why = self.refused(w, 1)
        self.assertIn("not acknowledged", why)
        self.assertIn("Input/output error", why)
        # Later ones are refused before they are applied, until a checkpoint.
        self.assertIn("until a checkpoint", self.refused(w, 2))
        self.assertIn("Input/output error", self.describe(w).durability.journal_error)
        # A checkpoint fails with the reason, leaves no temporary file, and
        # the previous checkpoint stays the last.
        e = self.assert_code(grpc.StatusCode.INTERNAL, self.checkpoint, w)
        self.assertIn("Input/output error", e.details())
        self.assertEqual([f for f in os.listdir(self.ckdir(w)) if f.endswith(".tmp")], [])
        d = self.describe(w).durability
        self.assertIn("Input/output error", d.last_error)
        self.assertEqual(d.last.generation, 1)
        self.assertTrue(os.path.exists(os.path.join(self.ckdir(w), "ckpt-%016x.rdc" % 1)))
        # The daemon keeps serving: samples, and inserts into a workload
        # that writes nothing.
        self.assertGreaterEqual(self.sample(w, 8).table_size, len(acked))
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=other.id, rows=rows(20)),
                                metadata=self.md(other), timeout=10)
        self.assertEqual(self.describe(other).counters.size, 20)

    def setup_workloads(self, acked):
        self.start()
        w = self.d.stub.RegisterWorkload(
            cartpole_spec(capacity=100000, durability="journal", alpha=1.0, epsilon=0.0),
            timeout=10)
        other = self.d.stub.RegisterWorkload(cartpole_spec(capacity=1000, durability="none"),
                                             timeout=10)
        for s in range(4):
            self.insert(w, acked, 100 + s)
        self.checkpoint(w)  # generation 1
        for s in range(4):
            self.insert(w, acked, 200 + s)  # in the journal only
        return w, other

    def test_fsync_eio_then_kill9(self):
        """EIO on every sync: the failure as above; then kill -9 and restart
        on working storage: checkpoint 1 + the journal bring back every
        acknowledged row."""
        acked = {}
        w, other = self.setup_workloads(acked)
        self.eio(True)
        self.check_failure(w, other, acked, writes=False)
        self.crash()
        self.eio(False)
        self.start()
        d = self.describe(w).durability
        self.assertIn("checkpoint 1", d.restored)
        self.verify(w, acked)
        self.insert(w, acked, 300)  # the journal works again after the restore
        self.crash()
        self.start()
        self.verify(w, acked)

    def test_write_eio_then_a_checkpoint_resumes(self):
        """EIO on writes and syncs; once the storage works again, inserts
        stay refused until a checkpoint succeeds, then are acknowledged,
        and a kill -9 loses none of them."""
        acked = {}
        w, other = self.setup_workloads(acked)
        self.eio(True, writes=True)
        self.check_failure(w, other, acked, writes=True)
        self.eio(False)
        self.assertIn("until a checkpoint", self.refused(w, 3))
        self.checkpoint(w)
        self.assertEqual(self.describe(w).durability.last_error, "")
        self.assertEqual(self.describe(w).durability.journal_error, "")
        for s in range(3):
            self.insert(w, acked, 400 + s)
        self.crash()
        self.start()
        self.verify(w, acked)

    def test_direct_write_refused(self):
        """A file system that states a direct-I/O alignment and then
        refuses the direct write (EINVAL): the journal goes on through the
        page cache, every insert is acknowledged and durable (a kill -9
        loses none), and the log says so once."""
        acked = {}
        self.start()
        with open(self.flag, "w") as f:
            f.write("d")
        w = self.d.stub.RegisterWorkload(
            cartpole_spec(capacity=100000, durability="journal", alpha=1.0, epsilon=0.0),
            timeout=10)
        for s in range(6):
            self.insert(w, acked, 500 + s)
        log = self.d.log_after("a direct write was refused")
        self.assertEqual(log.count("a direct write was refused"), 1, log)
        self.assertEqual(self.describe(w).durability.journal_error, "")
        self.crash()
        self.eio(False)
        self.start()
        self.verify(w, acked)
        self.insert(w, acked, 600)  # a reopened segment, direct again
        self.crash()
        self.start()
        self.verify(w, acked)


if __name__ == "__main__":
    import unittest
    unittest.main(verbosity=2)
