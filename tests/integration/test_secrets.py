#!/usr/bin/python3
"""Secrets at rest (issue 26, item 4), on the real replayd: a state
directory written before token hashing (schema version 2, workload tokens
in clear) is migrated at start, after which the database holds no token and
the workloads' clients keep working with the tokens they hold; new
registrations are stored hashed too; the admin token file is created 0600
and a daemon refuses one that others can read.

usage: test_secrets.py REPLAYD_EXE PROTO_DIR
"""
import hashlib
import os
import shutil
import sqlite3
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import Daemon, pb, TOKEN_KEY, grpc, cartpole_spec, rows, run_replayd  # noqa: E402

OLD_ID = "0123456789abcdef0123456789abcdef"
OLD_TOKEN = "5" * 32 + "a" * 32

# The schema as replayd wrote it at version 2 (store.c's migrations 1 and 2).
V2_SCHEMA = """
CREATE TABLE workloads (id TEXT PRIMARY KEY, token TEXT NOT NULL,
  created_unix INTEGER NOT NULL, spec BLOB NOT NULL, seq INTEGER NOT NULL UNIQUE);
CREATE TABLE profiles (device_fp TEXT NOT NULL, primitive TEXT NOT NULL,
  threads INTEGER NOT NULL, batch INTEGER NOT NULL, capacity INTEGER NOT NULL,
  fanout INTEGER NOT NULL, algorithm TEXT NOT NULL, network TEXT NOT NULL,
  build TEXT NOT NULL, latency_s REAL NOT NULL, reps INTEGER NOT NULL,
  items INTEGER NOT NULL, source TEXT NOT NULL, measured_unix INTEGER NOT NULL,
  PRIMARY KEY (device_fp, algorithm, network, batch, capacity, fanout, build,
  primitive, threads)) WITHOUT ROWID;
PRAGMA user_version = 2;
"""


def state_files(state):
    """Every byte under the state directory (checkpoints and journals
    too) except the admin token file (the operator's copy, which
    replayctl reads)."""
    out = b""
    for root, _, names in os.walk(state):
        for name in names:
            if root == state and name == "admin.token":
                continue
            with open(os.path.join(root, name), "rb") as f:
                out += f.read()
    return out


class TestSecrets(unittest.TestCase):
    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-secrets-")
        self.d = None

    def tearDown(self):
        if self.d is not None and self.d.alive():
            self.assertEqual(self.d.stop(), 0)
        shutil.rmtree(self.state, ignore_errors=True)

    def md(self, token):
        return ((TOKEN_KEY, token),)

    def test_old_state_directory_migrates_and_tokens_keep_working(self):
        db = sqlite3.connect(os.path.join(self.state, "replayd.db"))
        db.executescript(V2_SCHEMA)
        db.execute("INSERT INTO workloads VALUES (?, ?, ?, ?, 1)",
                   (OLD_ID, OLD_TOKEN, 1700000000, cartpole_spec().SerializeToString()))
        db.commit()
        db.close()
        os.chmod(os.path.join(self.state, "replayd.db"), 0o600)

        self.d = Daemon(self.state)
        stub = self.d.stub
        # The token the client has held since before the upgrade opens it.
        r = stub.InsertBatch(pb.InsertRequest(workload_id=OLD_ID, rows=rows(10)),
                             metadata=self.md(OLD_TOKEN), timeout=10)
        self.assertEqual(r.inserted, 10)
        s = stub.Sample(pb.SampleRequest(workload_id=OLD_ID, batch_size=4),
                        metadata=self.md(OLD_TOKEN), timeout=10)
        self.assertEqual(len(s.keys), 4)
        for wrong in ("6" * 64, OLD_TOKEN[:-1], OLD_TOKEN + "0",
                      "sha256:" + hashlib.sha256(OLD_TOKEN.encode()).hexdigest()):
            with self.assertRaises(grpc.RpcError) as cm:
                stub.Sample(pb.SampleRequest(workload_id=OLD_ID, batch_size=4),
                            metadata=self.md(wrong), timeout=10)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED, wrong)
        # A new registration: its token in the reply only.
        w = stub.RegisterWorkload(cartpole_spec(), timeout=10)
        self.assertEqual(len(w.token), 64)
        self.assertEqual(self.d.stop(), 0)

        # At rest: the hashes, and neither token anywhere in the files.
        db = sqlite3.connect(os.path.join(self.state, "replayd.db"))
        stored = dict(db.execute("SELECT id, token FROM workloads"))
        version = db.execute("PRAGMA user_version").fetchone()[0]
        db.close()
        self.assertGreaterEqual(version, 3)
        self.assertEqual(stored[OLD_ID],
                         "sha256:" + hashlib.sha256(OLD_TOKEN.encode()).hexdigest())
        self.assertEqual(stored[w.id], "sha256:" + hashlib.sha256(w.token.encode()).hexdigest())
        files = state_files(self.state)
        self.assertNotIn(OLD_TOKEN.encode(), files)
        self.assertNotIn(w.token.encode(), files)

        # A restart: both tokens still open their workloads.
        self.d = Daemon(self.state)
        for wid, tok in ((OLD_ID, OLD_TOKEN), (w.id, w.token)):
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=wid, rows=rows(3)),
                                    metadata=self.md(tok), timeout=10)
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=self.md(w.token),
                                   timeout=10)

    def test_admin_token_file(self):
        self.d = Daemon(self.state)
        path = os.path.join(self.state, "admin.token")
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        with open(path) as f:
            admin = f.read().strip()
        w = self.d.stub.RegisterWorkload(cartpole_spec(), timeout=10)
        # The admin token deletes; it is nowhere in the database.
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=self.md(admin), timeout=10)
        self.assertEqual(self.d.stop(), 0)
        self.assertNotIn(admin.encode(), state_files(self.state))
        # Readable by others: refused at start, naming the file and the fix.
        for mode in (0o644, 0o640, 0o604):
            os.chmod(path, mode)
            r = run_replayd(self.state)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("admin.token has mode %03o" % mode, r.stderr)
            self.assertIn("chmod 600", r.stderr)
        os.chmod(path, 0o600)
        self.d = Daemon(self.state)


if __name__ == "__main__":
    unittest.main(verbosity=2)
