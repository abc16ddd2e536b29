#!/usr/bin/python3
"""`replayctl top` (issue 26, item 2) against the real replayd while a
thread inserts and samples: `--once` prints one frame of at most 80 columns
with the workloads, their rates and devices (and `--json --once` one JSON
document); the live view runs in a pseudo-terminal of 80x24 columns,
redraws every second, quits on q and on Ctrl-C, and gives the terminal back
as it found it.

usage: test_top.py REPLAYD_EXE PROTO_DIR REPLAYCTL_EXE
"""
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import unittest

REPLAYCTL = os.path.abspath(sys.argv.pop(3))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import Daemon, pb, TOKEN_KEY, cartpole_spec, rows  # noqa: E402

ESC = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class TopBase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.state = tempfile.mkdtemp(prefix="replayd-top-")
        cls.d = Daemon(cls.state)
        cls.server = f"127.0.0.1:{cls.d.port}"
        stub = cls.d.stub
        spec = cartpole_spec(capacity=5000)
        spec.name = "busy one"
        cls.busy = stub.RegisterWorkload(spec, timeout=10)
        spec = cartpole_spec(capacity=100)
        spec.name = "a workload name far longer than the column it is shown in"
        cls.idle = stub.RegisterWorkload(spec, timeout=10)
        stub.InsertBatch(pb.InsertRequest(workload_id=cls.idle.id, rows=rows(50)),
                         metadata=((TOKEN_KEY, cls.idle.token),), timeout=10)
        cls.stop_feed = threading.Event()
        cls.feeder = threading.Thread(target=cls.feed, daemon=True)
        cls.feeder.start()

    @classmethod
    def feed(cls):
        md = ((TOKEN_KEY, cls.busy.token),)
        while not cls.stop_feed.is_set():
            cls.d.stub.InsertBatch(pb.InsertRequest(workload_id=cls.busy.id, rows=rows(64)),
                                   metadata=md, timeout=10)
            cls.d.stub.Sample(pb.SampleRequest(workload_id=cls.busy.id, batch_size=32),
                              metadata=md, timeout=10)
            time.sleep(0.01)

    @classmethod
    def tearDownClass(cls):
        cls.stop_feed.set()
        cls.feeder.join(10)
        cls.d.stop()
        shutil.rmtree(cls.state, ignore_errors=True)


class TestOnce(TopBase):
    def run_top(self, *args):
        return subprocess.run([REPLAYCTL, "--server", self.server, *args], capture_output=True,
                              text=True, timeout=60)

    def test_one_frame(self):
        r = self.run_top("top", "--once", "--interval", "0.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        for line in lines:
            self.assertLessEqual(len(line), 80, line)
            self.assertNotIn("\x1b", line, "no escape sequences in --once")
        self.assertRegex(lines[0], r"^replayd \S+ at 127\.0\.0\.1:\d+, up \S+, 2 workloads")
        self.assertRegex(lines[1], r"^devices +cpu0 ok L0 R2 S2")
        header = next(i for i, l in enumerate(lines) if l.startswith("ID "))
        table = {l.split()[0]: l for l in lines[header + 1:]}
        self.assertEqual(set(table), {self.busy.id[:8], self.idle.id[:8]})
        busy = table[self.busy.id[:8]].split()
        # ID NAME(2 words) ITEMS FILL INSERT/s SAMPLE/s GPS LOSS RUN
        self.assertEqual(busy[1:3], ["busy", "one"])
        self.assertNotEqual(busy[5], "0", "the busy workload inserts")
        self.assertNotEqual(busy[6], "0", "and samples")
        idle = table[self.idle.id[:8]]
        self.assertIn(" a workload ~ ", idle)  # cut to its 12 columns, marked
        self.assertRegex(idle, r" 50 +50% +0 +0 +- +- +-$")
        # The busiest first.
        self.assertLess(lines.index(table[self.busy.id[:8]]),
                        lines.index(table[self.idle.id[:8]]))

    def test_json(self):
        r = self.run_top("--json", "top", "--once", "--interval", "0.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertGreater(doc["interval_seconds"], 0.4)
        ws = {w["id"]: w for w in doc["workloads"]}
        self.assertGreater(ws[self.busy.id]["inserts_per_second"], 0)
        self.assertGreater(ws[self.busy.id]["samples_per_second"], 0)
        self.assertEqual(ws[self.idle.id]["inserts_per_second"], 0)
        self.assertEqual(ws[self.idle.id]["items"], 50)
        self.assertEqual(ws[self.idle.id]["fill"], 0.5)
        self.assertIsNone(ws[self.idle.id]["learner_steps_per_second"])
        self.assertEqual(doc["devices"][0]["device"], "cpu0")
        self.assertEqual(doc["devices"][0]["replay_modules"], 2)

    def test_usage(self):
        r = self.run_top("ls", "--once")
        self.assertEqual(r.returncode, 2)
        self.assertIn("only to top", r.stderr)
        r = self.run_top("top", "--interval", "0")
        self.assertEqual(r.returncode, 2)
        r = self.run_top("top", "extra")
        self.assertEqual(r.returncode, 2)

    def test_server_down(self):
        r = subprocess.run([REPLAYCTL, "--server", "127.0.0.1:1", "--timeout", "1", "top",
                            "--once"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot connect", r.stderr)


class TestLive(TopBase):
    def spawn(self, cols=80, rows_=24):
        pid, fd = pty.fork()
        if pid == 0:  # the child: its terminal is the pty, 80x24
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows_, cols, 0, 0))
            os.execv(REPLAYCTL, [REPLAYCTL, "--server", self.server, "top"])
        self.addCleanup(self.reap, pid, fd)
        self.before = termios.tcgetattr(fd)
        return pid, fd

    def reap(self, pid, fd):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)

    def read_until(self, fd, pred, timeout=10):
        out = b""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the child is gone
                    break
                if not chunk:
                    break
                out += chunk
                if pred(out):
                    return out
        return out

    def wait_exit(self, pid, fd, timeout=5):
        end = time.monotonic() + timeout
        out = b""
        while time.monotonic() < end:
            out += self.read_until(fd, lambda o: False, 0.2)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status, out
        self.fail("replayctl top did not quit:\n" + out.decode(errors="replace")[-2000:])

    def frames(self, out):
        """The text of each frame (split at the clear-screen sequence)."""
        text = out.decode(errors="replace")
        return [ESC.sub("", f) for f in text.split("\x1b[H\x1b[2J")[1:]]

    def check_restored(self, fd, out):
        text = out.decode(errors="replace")
        self.assertTrue(text.rstrip("\r\n").endswith("\x1b[?25h\x1b[?1049l"),
                        "the screen is not given back: " + repr(text[-80:]))
        after = termios.tcgetattr(fd)
        self.assertEqual(after[3] & (termios.ICANON | termios.ECHO),
                         self.before[3] & (termios.ICANON | termios.ECHO),
                         "the terminal's mode is not restored")

    def test_refreshes_and_quits_on_q(self):
        pid, fd = self.spawn()
        t0 = time.monotonic()
        out = self.read_until(fd, lambda o: o.count(b"\x1b[H\x1b[2J") >= 3, timeout=15)
        elapsed = time.monotonic() - t0
        frames = self.frames(out)
        self.assertGreaterEqual(len(frames), 3, out[-2000:])
        self.assertGreater(elapsed, 1.5, "redraws every second, not faster")
        last = frames[-2]  # a whole frame
        self.assertIn(self.busy.id[:8], last)
        self.assertIn("q quits", last)
        for line in last.replace("\r", "").split("\n"):
            self.assertLessEqual(len(line), 80, line)
        busy = next(l for l in last.split("\n") if l.startswith(self.busy.id[:8]))
        self.assertNotEqual(busy.split()[5], "0", "live insert rate")
        os.write(fd, b"q")
        status, rest = self.wait_exit(pid, fd)
        self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)
        self.check_restored(fd, out + rest)

    def test_ctrl_c(self):
        pid, fd = self.spawn()
        out = self.read_until(fd, lambda o: b"q quits" in o)
        self.assertIn(b"q quits", out)
        os.write(fd, b"\x03")  # the line discipline sends SIGINT
        status, rest = self.wait_exit(pid, fd)
        self.assertTrue(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status)
        self.check_restored(fd, out + rest)

    def test_narrow_terminal(self):
        pid, fd = self.spawn(cols=60, rows_=10)
        out = self.read_until(fd, lambda o: o.count(b"q quits") >= 2)
        frame = self.frames(out)[-1]
        lines = frame.replace("\r", "").rstrip("\n").split("\n")
        for line in lines:
            self.assertLessEqual(len(line), 60, line)
        self.assertLessEqual(len(lines), 10)
        os.write(fd, b"q")
        status, rest = self.wait_exit(pid, fd)
        self.assertEqual(os.WEXITSTATUS(status), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
