"""replayd_test: what every Python test of the real daemon shares.

Imported by tests/integration/test_*.py (test_daemon.py re-exports it, so
`from test_daemon import ...` keeps working). On import it takes the first
two command-line arguments, REPLAYD_EXE and PROTO_DIR, off sys.argv and
generates the Python stubs of api/replayd.proto with Debian's grpc tools.

- Daemon: one replayd on an ephemeral loopback port (the port read from its
  "listening on" line), its stderr collected by a thread.
- DaemonCase: a unittest case with a fresh state directory and a daemon
  per test, stopped with SIGTERM at the end (which must exit 0).
- Schema builders and row makers: cartpole_spec/rows (a bool "done"),
  dqn_spec (a hosted DQN learner's five columns, "discount" a float),
  dqn_rows/spread_priorities (its rows and priorities).
- run_replayd: a replayd expected to refuse to start (its exit code and
  stderr).
- rss_kib: a process's resident memory (a daemon's growth under a test).
"""
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest

import grpc

REPLAYD = os.path.abspath(sys.argv[1])
PROTO_DIR = os.path.abspath(sys.argv[2])
del sys.argv[1:3]

# Generate the Python stubs from the proto into a scratch directory.
_gen = tempfile.mkdtemp(prefix="replayd-pb-")
subprocess.run(
    [sys.executable, "-m", "grpc_tools.protoc", "-I", PROTO_DIR, "--python_out", _gen,
     "--grpc_python_out", _gen, os.path.join(PROTO_DIR, "replayd.proto")],
    check=True)
sys.path.insert(0, _gen)
import replayd_pb2 as pb  # noqa: E402
import replayd_pb2_grpc as pbg  # noqa: E402

TOKEN_KEY = "x-replayd-token"
OBS = 4


class Daemon:
    """One replayd process; stderr is collected by a thread."""

    def __init__(self, state_dir, *extra, env=None):
        self.lines = []
        self.proc = subprocess.Popen(
            [REPLAYD, "--listen", "127.0.0.1:0", "--state-dir", state_dir,
             "--log-level", "debug", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.port = None
        got = threading.Event()

        def pump():
            for line in self.proc.stderr:
                self.lines.append(line)
                m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
                if m and self.port is None:
                    self.port = int(m.group(1))
                    got.set()
            got.set()

        self.thread = threading.Thread(target=pump, daemon=True)
        self.thread.start()
        if not got.wait(30) or self.port is None:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("replayd did not start:\n" + "".join(self.lines))
        self.channel = grpc.insecure_channel(
            f"127.0.0.1:{self.port}",
            options=[("grpc.max_receive_message_length", 256 << 20),
                     ("grpc.max_send_message_length", 256 << 20)])
        self.stub = pbg.ReplayStub(self.channel)

    def log_after(self, *texts, timeout=10):
        """The log so far, once every text is in it or timeout seconds have
        passed (then the caller's assertIn shows what was there): a line
        is written by the daemon and read by the pump thread after the
        reply that it follows may have arrived."""
        deadline = time.monotonic() + timeout
        while True:
            log = "".join(self.lines)
            if all(t in log for t in texts) or time.monotonic() > deadline:
                return log
            time.sleep(0.02)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=30):
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self.thread.join(5)
        self.proc.stderr.close()
        return rc


def cartpole_fields(last):
    """obs, action, reward, next_obs, then `last`: a bool "done" or a float
    "discount" (a hosted learner's)."""
    return [
        pb.Field(name="obs", dtype=pb.FLOAT32, shape=[OBS]),
        pb.Field(name="action", dtype=pb.INT32),
        pb.Field(name="reward", dtype=pb.FLOAT32),
        pb.Field(name="next_obs", dtype=pb.FLOAT32, shape=[OBS]),
        pb.Field(name=last, dtype=pb.BOOL if last == "done" else pb.FLOAT32),
    ]


def cartpole_spec(capacity=1000, **kw):
    return pb.WorkloadSpec(name="cartpole", fields=cartpole_fields("done"), capacity=capacity,
                           seed=7, **kw)


def rss_kib(pid):
    """A process's resident memory in KiB (0 when /proc does not say)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rows(n, start=0):
    """n CartPole rows as packed columns; obs[0] carries the row number."""
    obs = b"".join(struct.pack("<4f", start + i, 0.5, -0.5, 1.0) for i in range(n))
    act = b"".join(struct.pack("<i", (start + i) % 2) for i in range(n))
    rew = b"".join(struct.pack("<f", 1.0) for _ in range(n))
    nxt = b"".join(struct.pack("<4f", start + i + 1, 0, 0, 0) for i in range(n))
    done = bytes((start + i) % 7 == 0 for i in range(n))
    return pb.RowBatch(count=n, columns=[obs, act, rew, nxt, done])


def dqn_rows(n, start=0):
    """n rows of dqn_spec's columns: obs[0] = (start + i) / 100, a float
    discount of 0.99."""
    obs = b"".join(struct.pack("<4f", (start + i) * 0.01, 0.1, -0.1, 0.2) for i in range(n))
    nxt = b"".join(struct.pack("<4f", (start + i) * 0.01 + 0.01, 0.1, -0.1, 0.2)
                   for i in range(n))
    return pb.RowBatch(count=n, columns=[
        obs, b"".join(struct.pack("<i", (start + i) % 2) for i in range(n)),
        struct.pack(f"<{n}f", *[1.0 if (start + i) % 3 else -1.0 for i in range(n)]), nxt,
        struct.pack(f"<{n}f", *([0.99] * n))])


def spread_priorities(n, start=0):
    """n priorities spread over [0, 10), a pattern of the row number."""
    return [((start + i) * 7919 % 1000) / 100.0 for i in range(n)]


def dqn_spec(name="dqn", capacity=10000, seed=3, hidden=(32, 32), batch=32):
    """A hosted DQN learner's workload: obs, action, reward, next_obs and a
    float discount, two actions."""
    return pb.WorkloadSpec(
        name=name, fields=cartpole_fields("discount"), capacity=capacity, seed=seed,
        learner=pb.LearnerSpec(algorithm="dqn", hidden=list(hidden), batch_size=batch,
                               num_actions=2))


def run_replayd(state, *args, exe=REPLAYD):
    """A replayd expected to refuse to start: its exit code and stderr. One
    that starts serving instead is killed at once and reported with
    returncode None, so a test fails without waiting for a timeout."""
    p = subprocess.Popen([exe, "--listen", "127.0.0.1:0", "--state-dir", state, *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines, served = [], False
    for line in p.stderr:
        lines.append(line)
        if "listening on" in line:
            served = True
            p.kill()
            break
    p.stderr.close()
    rc = p.wait(60)
    return types.SimpleNamespace(returncode=None if served else rc, stderr="".join(lines))


class DaemonCase(unittest.TestCase):
    """A fresh state directory and a daemon started with daemon_args() for
    each test; a daemon still alive at the end must exit 0 on SIGTERM."""
    extra = ()
    replayctl = None  # the replayctl program, for ctl()

    def daemon_args(self):
        return self.extra

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-state-")
        self.d = Daemon(self.state, *self.daemon_args())

    def tearDown(self):
        if self.d.alive():
            self.assertEqual(self.d.stop(), 0, "replayd did not exit 0 on SIGTERM")
        shutil.rmtree(self.state, ignore_errors=True)

    def admin(self):
        with open(os.path.join(self.state, "admin.token")) as f:
            return ((TOKEN_KEY, f.read().strip()),)

    def md(self, w):
        return ((TOKEN_KEY, w.token),)

    def assert_code(self, code, fn, *a, **kw):
        """fn(*a, **kw) fails with code and a message; the error."""
        with self.assertRaises(grpc.RpcError) as cm:
            fn(*a, **kw)
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        self.assertTrue(cm.exception.details(), "status without a message")
        return cm.exception

    def ctl(self, *args, ok=True, timeout=60, deadline=20):
        """replayctl against this daemon (STATE_DIRECTORY: its admin token)."""
        env = dict(os.environ, STATE_DIRECTORY=self.state)
        r = subprocess.run([self.replayctl, "--server", f"127.0.0.1:{self.d.port}", "--timeout",
                            str(deadline), *args], capture_output=True, text=True, env=env,
                           timeout=timeout)
        if ok:
            self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def workload_count(self):
        return len(self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=10).workloads)
