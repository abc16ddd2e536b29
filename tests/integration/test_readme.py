#!/usr/bin/python3
"""The READMEs' commands, run as they are written. The commands are read
from README.md and clients/c/README.md themselves, so the test fails when
a README and the programs drift apart:

- Quickstart: every command of the block, in order, in bash, in a scratch
  directory whose build/ is this build, against a real replayd started as
  the README starts it (README.md: `scripts/run` when this is the source
  tree's build/, else this build's daemon as scripts/run's last line
  starts it; clients/c/README.md: build/daemon/replayd), with the embedded
  defaults but a free loopback port (REPLAYD_SERVER tells the tools; HOME
  is a scratch directory, so the daemon's state and admin token are where
  `replayctl rm` looks for them). The `export ...=...` line takes the line
  the actor printed. Each command's exit status and key output are
  checked; a command this file has no check for fails the test.
- Hosted learning: each `learn.sh` command (it starts its own daemon) must
  exit 0 with a learning curve whose last evaluation meets its target, and
  README.md's CartPole command must train to what README.md promises (475
  over 100 evaluation episodes).
The READMEs' build commands (meson setup, ninja) are not run: this build
stands for them.

usage: test_readme.py SOURCE_ROOT BUILD_ROOT [unittest arguments]
"""
import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

SRC = os.path.abspath(sys.argv[1])
BUILD = os.path.abspath(sys.argv[2])
del sys.argv[1:3]


def readme_section(readme, title):
    """The text of a README (a path under the source root) from the line
    `title` starts to the next heading."""
    with open(os.path.join(SRC, readme)) as f:
        text = f.read()
    m = re.search(r"^" + re.escape(title) + r".*?(?=^#|\Z)", text, re.M | re.S)
    if m is None:
        raise AssertionError(f"{readme} has no section starting {title!r}")
    return m.group(0)


def code_block(text, after=""):
    """(command, comment) of each line of the first indented (4-space)
    block of text after the line containing `after`; comment-only lines
    (sample output) are left out."""
    if after:
        i = text.find(after)
        if i < 0:
            raise AssertionError(f"no {after!r} in the README")
        text = text[i:]
    block, started = [], False
    for line in text.splitlines():
        if line.startswith("    ") and line.strip():
            started = True
            block.append(line[4:])
        elif started and line.strip():
            break
    if not block:
        raise AssertionError(f"no command block after {after!r} in the README")
    cmds = []
    for line in block:
        if line.lstrip().startswith("#"):
            continue
        cmd = re.sub(r"\s+#.*$", "", line).strip()
        comment = line[len(line.split("#")[0]):] if "#" in line else ""
        cmds.append((cmd, comment))
    return cmds


def scratch_env(home):
    """The environment of a user with a fresh home, none of replayd's
    variables set from outside."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("REPLAYD_") and k not in ("STATE_DIRECTORY", "XDG_STATE_HOME")}
    env["HOME"] = home
    return env


class ReadmeBase(unittest.TestCase):
    def setUp(self):
        # A directory that looks like the source tree's root to the
        # README's relative paths: build/ is this build, clients/ the source's.
        self.root = tempfile.mkdtemp(prefix="replayd-readme-")
        os.symlink(BUILD, os.path.join(self.root, "build"))
        os.symlink(os.path.join(SRC, "clients"), os.path.join(self.root, "clients"))
        self.home = os.path.join(self.root, "home")
        os.mkdir(self.home)
        self.env = scratch_env(self.home)

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def sh(self, cmd, timeout):
        """cmd run by bash in the scratch root, as a user types it."""
        return subprocess.run(["bash", "-c", cmd], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


class TestQuickstart(ReadmeBase):
    def start_daemon(self, via_run):
        """The daemon as the README starts it, with its defaults but a free
        port: `scripts/run` (via_run) or build/daemon/replayd. scripts/run
        builds and runs the source tree's build/; when this test runs from
        another build (ASan), that build's daemon is started the way
        scripts/run's last line starts it."""
        run = os.path.join(SRC, "scripts/run")
        with open(run) as f:
            last = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")][-1]
        self.assertEqual(last, 'exec build/daemon/replayd "$@"',
                         "scripts/run no longer starts the daemon as this test does")
        if via_run and os.path.realpath(BUILD) == os.path.realpath(os.path.join(SRC, "build")):
            cmd = [run, "--listen", "127.0.0.1:0"]
        else:
            cmd = ["build/daemon/replayd", "--listen", "127.0.0.1:0"]
        print(f"\n  the daemon: {' '.join(cmd)}", file=sys.stderr)
        self.daemon = subprocess.Popen(cmd, cwd=self.root, env=self.env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True)
        self.log, got = [], threading.Event()

        def pump():
            for line in self.daemon.stderr:
                self.log.append(line)
                if "listening on" in line:
                    got.set()
            got.set()

        self.pump = threading.Thread(target=pump, daemon=True)
        self.pump.start()
        got.wait(60)
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", "".join(self.log))
        if m is None:
            self.daemon.kill()
            self.fail("replayd did not start:\n" + "".join(self.log))
        self.port = int(m.group(1))
        self.env["REPLAYD_SERVER"] = f"127.0.0.1:{self.port}"
        # The defaults scripts/run relies on: state under ~/.local/state.
        self.state = os.path.join(self.home, ".local/state/replayd")
        self.assertTrue(os.path.exists(os.path.join(self.state, "admin.token")))

    def tearDown(self):
        if getattr(self, "daemon", None) is not None:
            if self.daemon.poll() is None:
                self.daemon.send_signal(signal.SIGTERM)
            rc = self.daemon.wait(30)
            self.pump.join(5)
            self.daemon.stderr.close()
            self.assertEqual(rc, 0, "replayd did not exit 0 on SIGTERM:\n" + "".join(self.log))
        super().tearDown()

    def test_quickstart_as_written(self):
        sec = readme_section("README.md", "## Quickstart")
        self.assertIn("With `scripts/run` running", sec)
        self.quickstart(code_block(sec), via_run=True)

    def test_client_readme_quickstart_as_written(self):
        """clients/c/README.md's Quickstart: the build (this build stands
        for it), the daemon in terminal 1, the commands of terminal 2."""
        sec = readme_section("clients/c/README.md", "## Quickstart")
        self.assertEqual(code_block(sec), [("meson setup build && ninja -C build", "")])
        self.assertEqual(code_block(sec, after="Terminal 1"), [("build/daemon/replayd", "")])
        self.quickstart(code_block(sec, after="Terminal 2"), via_run=False)

    def quickstart(self, cmds, via_run):
        self.start_daemon(via_run)
        self.ran = []
        last = None
        for cmd, comment in cmds:
            with self.subTest(command=cmd):
                m = re.fullmatch(r"export ((?:\w+=\.\.\.\s*)+)", cmd)
                if m:  # "export A=... B=...  # the line it printed"
                    self.export_printed(m.group(1).split(), last)
                    continue
                r = self.sh(cmd, timeout=300)
                self.assertEqual(r.returncode, 0, f"{cmd}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
                self.check(cmd, r.stdout, comment)
                self.ran.append(cmd)
                last = r
        # Every program of the Quickstart ran, and rm's workload is gone.
        for prog in ("replayctl status", "replayd-actor --register", "replayd-remote-learner",
                     "replayctl ls", "replayctl describe", "replayctl rm"):
            self.assertTrue(any(prog in c for c in self.ran), f"the Quickstart no longer runs {prog}")
        r = self.sh("build/clients/c/replayctl ls", timeout=60)
        self.assertNotIn(self.env["REPLAYD_WORKLOAD"], r.stdout, "rm left the workload listed")
        r = self.sh("build/clients/c/replayctl describe $REPLAYD_WORKLOAD", timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("NOT_FOUND", r.stderr)

    def export_printed(self, names, last):
        """The README's export line stands for the one the actor printed."""
        self.assertIsNotNone(last, "the Quickstart exports before any command printed a line")
        lines = [ln.strip() for ln in last.stdout.splitlines()
                 if ln.strip().startswith("export ")]
        self.assertEqual(len(lines), 1, f"expected one export line in:\n{last.stdout}")
        pairs = [a.split("=", 1) for a in lines[0].split()[1:]]
        self.assertEqual([n for n, _ in pairs], [n.split("=")[0] for n in names],
                         "the README exports other variables than the actor prints")
        for n, v in pairs:
            self.env[n] = v

    def args_of(self, cmd, flag, default):
        m = re.search(r"(?:^|\s)" + re.escape(flag) + r"[ =](\S+)", cmd)
        return m.group(1) if m else default

    def check(self, cmd, out, comment):
        """The key output of each Quickstart command."""
        words = cmd.split()
        prog = os.path.basename(words[0])
        sub = words[1] if len(words) > 1 else ""
        wid = self.env.get("REPLAYD_WORKLOAD", "")
        if prog == "replayctl" and sub == "status":
            self.assertRegex(out, rf"(?m)^server\s+127\.0\.0\.1:{self.port}$")
            self.assertRegex(out, r"(?m)^version\s+\S+")
            self.assertRegex(out, r"(?m)^workloads\s+0$")
            self.assertRegex(out, r"(?m)^\s+cpu\s+.*\s+ok$")
        elif prog == "replayd-actor" and "--register" in words:
            m = re.search(r"(?m)^registered workload ([0-9a-f]{32}) \(cartpole, capacity \d+\)$", out)
            self.assertIsNotNone(m, out)
            self.assertRegex(out, rf"(?m)^\s+--workload {m.group(1)} --token [0-9a-f]{{64}}$")
            self.assertRegex(out, rf"(?m)^\s+export REPLAYD_WORKLOAD={m.group(1)} "
                                  r"REPLAYD_TOKEN=[0-9a-f]{64}$")
            if self.args_of(cmd, "--steps", None) == "0":
                self.assertNotIn("streamed", out)
        elif prog == "replayd-actor":
            steps = int(self.args_of(cmd, "--steps", "100000"))
            self.assertRegex(out, rf"(?m)^streamed {steps} transitions in ")
            self.assertRegex(out, rf"(?m)^server inserted {steps} rows, first key 0$")
            self.steps = steps
        elif prog == "replayd-remote-learner":
            it = int(self.args_of(cmd, "--iterations", None))
            batch = int(self.args_of(cmd, "--batch", None))
            self.assertRegex(out, rf"(?m)^{it} batches of {batch} in ")
            m = re.search(r"(?m)^priority updates: (\d+) applied, (\d+) stale", out)
            self.assertIsNotNone(m, out)
            self.assertEqual(int(m.group(1)) + int(m.group(2)), it * batch)
            self.samples = it * batch
            # Its stream samples up to a window (4 batches) ahead of it.
            self.window = 4 * batch
        elif prog == "replayctl" and sub == "ls":
            row = [ln.split() for ln in out.splitlines() if ln.startswith(wid)]
            self.assertEqual(len(row), 1, out)
            # ID NAME SIZE/CAPACITY INSERTS SAMPLES UPDATES STALE
            self.assertEqual(row[0][1], "cartpole")
            self.assertEqual(int(row[0][3]), self.steps)
            self.assertTrue(self.samples <= int(row[0][4]) <= self.samples + self.window, out)
            self.assertEqual(int(row[0][5]) + int(row[0][6]), self.samples)
        elif prog == "replayctl" and sub == "describe":
            self.assertRegex(out, rf"(?m)^id\s+{wid}$")
            self.assertRegex(out, rf"(?m)^\s+inserts\s+{self.steps}$")
            m = re.search(r"(?m)^\s+samples\s+(\d+)$", out)
            self.assertIsNotNone(m, out)
            self.assertTrue(self.samples <= int(m.group(1)) <= self.samples + self.window, out)
        elif prog == "replayctl" and sub == "checkpoint":
            self.assertNotIn("--token", cmd)  # the admin token file, as rm
            self.assertRegex(out, rf"(?m)^{wid} checkpoint \d+ at \S+: \d+ items, \d+ bytes")
        elif prog == "replayctl" and sub == "rm":
            self.assertNotIn("--token", cmd)  # the admin token file from the default state dir
            self.assertRegex(out, rf"(?m)^deleted workload {wid}$")
        else:
            self.fail(f"README Quickstart command without a check in {__file__}: {cmd}")


class TestHostedLearning(ReadmeBase):
    def learn_sh_defaults(self):
        """(evaluation episodes, {env: target}) from learn.sh --help."""
        r = self.sh("clients/c/examples/learn.sh --help", timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        episodes = re.search(r"--eval-episodes N\s+(\d+)", r.stdout)
        targets = re.search(r"--target R\s+.*cartpole (\S+), pendulum (\S+)", r.stdout)
        self.assertTrue(episodes and targets, r.stdout)
        return int(episodes.group(1)), dict(cartpole=float(targets.group(1)),
                                             pendulum=float(targets.group(2)))

    def test_learn_sh_as_written(self):
        """README.md's learn.sh commands, held to the target it promises."""
        sec = readme_section("README.md", "## Quickstart")
        prose = sec[sec.find("Hosted learning"):]
        m = re.search(r"mean\s+return\s+over\s+(\d+)\s+evaluation\s+episodes\s+reaches\s+(\d+)",
                      prose)
        self.assertIsNotNone(m, "the README no longer states the CartPole target")
        promised = (int(m.group(1)), float(m.group(2)))  # (100, 475)
        cmds = code_block(prose, after="Hosted learning")
        self.assertTrue(any("--env cartpole" in c for c, _ in cmds))
        self.learn(cmds, promised)

    def test_client_readme_learn_sh_as_written(self):
        """clients/c/README.md's: after its `ninja -C build` (this build
        stands for it), the commands README.md does not run already."""
        sec = readme_section("clients/c/README.md", "## Hosted learning")
        cmds = code_block(sec)
        self.assertEqual(cmds[0], ("ninja -C build", ""))
        top = readme_section("README.md", "## Quickstart")
        done = {c for c, _ in code_block(top[top.find("Hosted learning"):],
                                         after="Hosted learning")}
        self.learn([c for c in cmds[1:] if c[0] not in done], None)

    def learn(self, cmds, promised):
        episodes_default, targets = self.learn_sh_defaults()
        for cmd, _ in cmds:
            with self.subTest(command=cmd):
                self.assertTrue(cmd.startswith("clients/c/examples/learn.sh build "), cmd)
                env = re.search(r"--env (\w+)", cmd).group(1)
                m = re.search(r"--eval-episodes (\d+)", cmd)
                episodes = int(m.group(1)) if m else episodes_default
                m = re.search(r"--target (\S+)", cmd)
                target = float(m.group(1)) if m else targets[env]
                if env == "cartpole" and promised is not None:
                    self.assertEqual((episodes, target), promised,
                                     "the CartPole command does not train to what the README says")
                r = self.sh(cmd, timeout=600)
                self.assertEqual(r.returncode, 0, f"{cmd}\n{r.stderr}")
                with open(os.path.join(self.root, re.search(r"--out (\S+)", cmd).group(1))) as f:
                    curve = list(csv.reader(f))
                self.assertEqual(curve[0], ["wall_s", "env_steps", "train_steps",
                                            "weight_version", "eval_mean_return"])
                self.assertGreater(len(curve), 1, "no evaluation in the curve")
                self.assertGreaterEqual(float(curve[-1][4]), target, f"{cmd}: {curve}")
                self.assertIn(f"reached the target {m.group(1) if m else '%g' % target}",
                              r.stderr)
                print(f"{cmd}: {r.stderr.strip().splitlines()[-1]}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
