#!/usr/bin/python3
"""What the real replayd does at start (issue 20): it refuses a state
directory another replayd holds, naming that daemon's pid, while the first
keeps serving, and starts again once the holder is killed with SIGKILL; it
refuses a database whose pages are damaged under an intact header, saying
what to do, or one with a row it cannot read, instead of serving fewer
workloads than it stored; and `replayd --fpga-csim u250`, the
README's command, works from the build tree without --fpga-parts-dir.

usage: test_startup.py REPLAYD_EXE PROTO_DIR
"""
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import REPLAYD, Daemon, pb, TOKEN_KEY, cartpole_spec, rows, run_replayd  # noqa: E402

SOURCE_PARTS = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "..", "..", "backends", "fpga", "parts"))


def read(path):
    with open(path, "rb") as f:
        return f.read()


def damage_pages(db):
    """Overwrite every page after the first with garbage: the 100-byte
    header and the schema page stay, so SQLite opens the file and only the
    reads that reach a b-tree fail."""
    data = bytearray(read(db))
    page = int.from_bytes(data[16:18], "big")
    page = 65536 if page == 1 else page
    assert len(data) >= 2 * page, (len(data), page)
    for off in range(page, len(data)):
        data[off] = (off * 37 + 11) & 0xFF
    with open(db, "r+b") as f:
        f.write(data)


class StateDirCase(unittest.TestCase):
    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-startup-")
        self.daemons = []

    def tearDown(self):
        for d in self.daemons:
            if d.alive():
                self.assertEqual(d.stop(), 0, "replayd did not exit 0 on SIGTERM")
        shutil.rmtree(self.state, ignore_errors=True)

    def start(self, *extra):
        d = Daemon(self.state, *extra)
        self.daemons.append(d)
        return d

    def workload_ids(self, d):
        r = d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=10)
        return {w.id for w in r.workloads}


class TestStateDirLock(StateDirCase):
    def test_second_daemon_refused_first_keeps_serving(self):
        first = self.start()
        w = first.stub.RegisterWorkload(cartpole_spec(), timeout=10)
        token = read(os.path.join(self.state, "admin.token"))
        with open(os.path.join(self.state, "replayd.lock")) as f:
            self.assertEqual(f.read(), f"{first.proc.pid}\n")

        r = run_replayd(self.state)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"state directory {self.state} is in use by replayd pid {first.proc.pid}",
                      r.stderr)
        self.assertNotIn("listening on", r.stderr)
        self.assertNotIn("restored", r.stderr)
        self.assertEqual(read(os.path.join(self.state, "admin.token")), token)

        # The first daemon did not notice: it still holds and serves all.
        self.assertTrue(first.alive())
        md = ((TOKEN_KEY, w.token),)
        first.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(8)),
                               metadata=md, timeout=10)
        s = first.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=4), metadata=md,
                              timeout=10)
        self.assertEqual(len(s.keys), 4)
        w2 = first.stub.RegisterWorkload(cartpole_spec(), timeout=10)
        self.assertEqual(self.workload_ids(first), {w.id, w2.id})

    def test_restart_after_kill9(self):
        first = self.start()
        w = first.stub.RegisterWorkload(cartpole_spec(), timeout=10)
        first.channel.close()
        first.proc.send_signal(signal.SIGKILL)
        self.assertEqual(first.proc.wait(30), -signal.SIGKILL)
        # The file stays, with the dead daemon's pid in it: not a lock.
        with open(os.path.join(self.state, "replayd.lock")) as f:
            self.assertEqual(f.read(), f"{first.proc.pid}\n")

        second = self.start()
        self.assertEqual(self.workload_ids(second), {w.id})
        with open(os.path.join(self.state, "replayd.lock")) as f:
            self.assertEqual(f.read(), f"{second.proc.pid}\n")
        # And it is the holder now.
        r = run_replayd(self.state)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"is in use by replayd pid {second.proc.pid}", r.stderr)


class TestDamagedDatabase(StateDirCase):
    def test_refused_at_start(self):
        d = self.start()
        ids = {d.stub.RegisterWorkload(cartpole_spec(capacity=100 + i), timeout=10).id
               for i in range(3)}
        self.assertEqual(d.stop(), 0)
        db = os.path.join(self.state, "replayd.db")
        self.assertFalse(os.path.exists(db + "-wal") and os.path.getsize(db + "-wal") > 0)
        damage_pages(db)
        before = read(db)

        r = run_replayd(self.state)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"{db} is damaged: move it and its -wal and -shm files aside to start "
                      "empty (its workloads are lost), or restore a backup; quick_check: ",
                      r.stderr)
        self.assertRegex(r.stderr, r"quick_check: Page \d+: ")  # the first problem
        self.assertNotIn("listening on", r.stderr)
        self.assertEqual(read(db), before)  # left for the operator

        # What the message says to do works: moved aside, it starts empty.
        os.rename(db, db + ".damaged")
        for side in ("-wal", "-shm"):
            if os.path.exists(db + side):
                os.rename(db + side, db + ".damaged" + side)
        d = self.start()
        self.assertEqual(self.workload_ids(d), set())
        self.assertEqual(len(ids), 3)

    def test_unreadable_row_refused(self):
        # Pages intact, one row the store cannot read back (an empty id, as
        # a hand edit could leave): the daemon stops instead of serving the
        # other workloads as if they were all there is.
        d = self.start()
        d.stub.RegisterWorkload(cartpole_spec(), timeout=10)
        self.assertEqual(d.stop(), 0)
        db = os.path.join(self.state, "replayd.db")
        with sqlite3.connect(db) as h:
            h.execute("INSERT INTO workloads (id, token, created_unix, spec, seq) "
                      "VALUES ('', 'tok', 1, x'', 1000)")
        h.close()
        r = run_replayd(self.state)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"cannot read the stored workloads: {db}: a stored workload has a "
                      "malformed id or token", r.stderr)


class TestFpgaCsimFromBuildTree(StateDirCase):
    """The README's `replayd --fpga-csim u250`, as written: no
    --fpga-parts-dir, run from the build tree (from any working directory)."""

    def test_lists_the_csim_fpga(self):
        cwd = os.getcwd()
        os.chdir(self.state)
        try:
            d = self.start("--fpga-csim", "u250")
        finally:
            os.chdir(cwd)
        fpgas = [x for x in d.stub.ListDevices(pb.ListDevicesRequest(), timeout=10).devices
                 if x.kind == "fpga" and x.isa == "csim"]
        self.assertEqual([x.model for x in fpgas], ["u250"])
        log = d.log_after("FPGA parts from")
        self.assertIn(f", then {SOURCE_PARTS}", log)

    def test_unknown_part_names_the_flag_and_dirs(self):
        r = run_replayd(self.state, "--fpga-csim", "u999")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no FPGA part 'u999' in ", r.stderr)
        self.assertIn(f"{SOURCE_PARTS} (known: u200, u250, u280)", r.stderr)
        self.assertIn("give the directory of part files with --fpga-parts-dir", r.stderr)

    def test_installed_copy_does_not_read_the_source_tree(self):
        # The same binary elsewhere (as `meson install` puts it) looks only
        # where parts are installed.
        copy = os.path.join(self.state, "bin", "replayd")
        os.makedirs(os.path.dirname(copy))
        shutil.copy2(REPLAYD, copy)
        r = run_replayd(os.path.join(self.state, "s"), "--fpga-csim", "u999", exe=copy)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("no FPGA part 'u999' in ", r.stderr)
        self.assertNotIn(SOURCE_PARTS, r.stderr)
        self.assertIn("--fpga-parts-dir", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
