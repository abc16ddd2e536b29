"""What both CartPole examples share: importing replayd, a daemon of their
own, the command line and the shutdown of the actors, CartPole in numpy
(vectorized), Ape-X n-step rows, the greedy evaluation, and the actor's
exploration schedule.

CartPole is the classic control task (Barto et al. 1983, as Gym writes it):
the dynamics, limits (|x| > 2.4, |theta| > 12 degrees), reward 1 a step and
the 500-step time limit of clients/c/examples/cartpole.c, integrated with
explicit Euler; here N environments step at once in numpy.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def import_replayd():
    """replayd: installed, or else built from this source tree into a scratch
    directory (gen_proto.import_from_source)."""
    try:
        import replayd
        return replayd
    except ImportError:
        sys.path.insert(0, os.path.dirname(HERE))
        import gen_proto
        return gen_proto.import_from_source()


# -- a daemon of the example's own ---------------------------------------------

class LocalDaemon:
    """BUILD/daemon/replayd on a loopback port the kernel picks, with a
    scratch state directory; stop() ends it (SIGTERM) and removes it."""

    def __init__(self, exe, *flags):
        self.state = tempfile.mkdtemp(prefix="replayd-example-")
        self.log_path = os.path.join(self.state, "replayd.log")
        self.proc = subprocess.Popen(
            [exe, "--listen", "127.0.0.1:0", "--state-dir", self.state,
             "--log-file", self.log_path, *flags],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.address = None
        for _ in range(300):
            if self.proc.poll() is not None:
                break
            try:
                with open(self.log_path) as f:
                    m = re.search(r"listening on 127\.0\.0\.1:(\d+)", f.read())
            except FileNotFoundError:
                m = None
            if m:
                self.address = f"127.0.0.1:{m.group(1)}"
                break
            time.sleep(0.1)
        if self.address is None:
            self.stop()
            raise SystemExit(f"the daemon {exe} did not start")
        with open(os.path.join(self.state, "admin.token")) as f:
            self.admin_token = f.read().strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.state, ignore_errors=True)


# -- CartPole ------------------------------------------------------------------

GRAVITY, MASSCART, MASSPOLE, LENGTH, FORCE_MAG, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASSCART + MASSPOLE
POLEMASS_LENGTH = MASSPOLE * LENGTH
X_LIMIT = 2.4
THETA_LIMIT = 12 * 2 * np.pi / 360
MAX_STEPS = 500
OBS_DIM, N_ACTIONS = 4, 2


class VecCartPole:
    """n CartPoles stepped together. step() returns, per environment, the
    observation after the step, the reward, terminated and truncated; an
    environment whose episode ended starts a new one at once, and its
    first observation is in `obs` (so next_obs of the ended step is the
    returned one, the next step starts from obs)."""

    def __init__(self, n, seed):
        self.n = n
        self.rng = np.random.default_rng(seed)
        self.state = np.zeros((n, 4))
        self.steps = np.zeros(n, np.int64)
        self.returns = np.zeros(n)
        self.finished = []  # returns of completed episodes
        self.reset(np.ones(n, bool))

    def reset(self, which):
        k = int(which.sum())
        self.state[which] = self.rng.uniform(-0.05, 0.05, (k, 4))
        self.steps[which] = 0
        self.returns[which] = 0

    @property
    def obs(self):
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, th, th_dot = self.state.T
        force = np.where(action == 1, FORCE_MAG, -FORCE_MAG)
        cos, sin = np.cos(th), np.sin(th)
        temp = (force + POLEMASS_LENGTH * th_dot ** 2 * sin) / TOTAL_MASS
        th_acc = (GRAVITY * sin - cos * temp) / (
            LENGTH * (4.0 / 3.0 - MASSPOLE * cos ** 2 / TOTAL_MASS))
        x_acc = temp - POLEMASS_LENGTH * th_acc * cos / TOTAL_MASS
        self.state = np.stack([x + TAU * x_dot, x_dot + TAU * x_acc,
                               th + TAU * th_dot, th_dot + TAU * th_acc], 1)
        self.steps += 1
        self.returns += 1.0
        x, th = self.state[:, 0], self.state[:, 2]
        term = (np.abs(x) > X_LIMIT) | (np.abs(th) > THETA_LIMIT)
        trunc = ~term & (self.steps >= MAX_STEPS)
        next_obs = self.obs
        done = term | trunc
        if done.any():
            self.finished.extend(self.returns[done].tolist())
            self.reset(done)
        return next_obs, np.ones(self.n, np.float32), term, trunc


def parse_args(doc, time_limit, out):
    """The examples' command line: the daemon to start or to use, the actors,
    the target mean return and when to give up, evaluation and output.
    doc is the example's docstring (first paragraph: the description)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=doc.split("\n\n", 1)[1])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--replayd", help="start this daemon (BUILD/daemon/replayd)")
    where.add_argument("--server", help="use the daemon at HOST:PORT")
    ap.add_argument("--actors", type=int, default=4)
    ap.add_argument("--envs-per-actor", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", type=float, default=475.0)
    ap.add_argument("--time-limit", type=float, default=time_limit)
    ap.add_argument("--eval-every", type=float, default=10.0)
    ap.add_argument("--eval-episodes", type=int, default=100)
    ap.add_argument("--max-lag", type=int, default=5000)
    ap.add_argument("--out", default=out)
    return ap.parse_args()


def daemon_of(a):
    """The daemon of parse_args' arguments: (a LocalDaemon started from
    --replayd, its address) or (None, --server)."""
    daemon = LocalDaemon(a.replayd) if a.replayd else None
    return daemon, daemon.address if daemon else a.server


def session(a):
    """Where an example's main starts: the replayd module, the daemon and
    its address (daemon_of), a spawn context (gRPC channels must not cross a
    fork) and a stop event of it for the actors."""
    import multiprocessing as mp
    replayd = import_replayd()
    daemon, address = daemon_of(a)
    ctx = mp.get_context("spawn")
    return replayd, daemon, address, ctx, ctx.Event()


def start_actors(ctx, actor, n, args_of, procs):
    """Start n daemon processes of actor in ctx, actor i with the arguments
    args_of(i), each appended to procs as it starts (so that stop_all stops
    those started if a later one fails)."""
    for i in range(n):
        p = ctx.Process(target=actor, args=args_of(i), daemon=True)
        p.start()
        procs.append(p)


def stop_all(stop, procs, daemon):
    """The examples' end: signal the actors, give each 10 s, then terminate
    it; stop the daemon the example started (None: it used a server)."""
    stop.set()
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.terminate()
    if daemon:
        daemon.stop()


def evaluate(policy, episodes=100, seed=12345):
    """Mean return of greedy episodes: policy(obs (k,4) float32) -> Q (k,2).
    All episodes run at once; the same start states every time."""
    env = VecCartPole(episodes, seed)
    alive = np.ones(episodes, bool)
    total = np.zeros(episodes)
    for _ in range(MAX_STEPS):
        if not alive.any():
            break
        a = np.argmax(policy(env.obs), axis=1)
        _, r, term, trunc = env.step(a)
        total += r * alive
        alive &= ~(term | trunc)
    return float(total.mean())


def epsilon_greedy(net, obs, rng, eps):
    """An actor's actions for obs (k,4): uniform while it has no policy (net
    None), else greedy on net.forward(obs) except, with probability eps per
    environment, uniform."""
    k = len(obs)
    if net is None:
        return rng.integers(0, N_ACTIONS, k)
    a = np.argmax(net.forward(obs), axis=1)
    explore = rng.random(k) < eps
    a[explore] = rng.integers(0, N_ACTIONS, int(explore.sum()))
    return a


def actor_step(env, ns, net, rng, eps):
    """One step of an actor's environments: epsilon_greedy actions, their
    transitions pushed into the n-step rows ns."""
    obs = env.obs
    a = epsilon_greedy(net, obs, rng, eps)
    nxt, r, term, trunc = env.step(a)
    ns.push(obs, a, r, nxt, term, trunc)


def apex_epsilon(base, i, n):
    """Ape-X's per-actor exploration: actor i of n uses base^(1 + 7 i/(n-1))."""
    return base if n <= 1 else base ** (1 + 7 * i / (n - 1))


# -- n-step rows ---------------------------------------------------------------

class NStep:
    """Ape-X n-step rows for each of n environments (clients/c/examples/nstep.h):
    obs_t, a_t, R = sum_{k<m} gamma^k r_{t+k}, next_obs = obs_{t+m}, and
    discount gamma^m, or 0 when the episode terminated within the window. At
    an episode's end its pending windows are emitted with the m <= n steps
    they have. Each environment step yields one row."""

    FIELDS = {"obs": (np.float32, (OBS_DIM,)), "action": np.int32, "reward": np.float32,
              "next_obs": (np.float32, (OBS_DIM,)), "discount": np.float32}

    def __init__(self, envs, n, gamma):
        self.n, self.gamma = n, gamma
        self.win = [deque() for _ in range(envs)]
        self.out = {k: [] for k in self.FIELDS}

    def push(self, obs, action, reward, next_obs, term, trunc):
        for e in range(len(self.win)):
            w = self.win[e]
            w.append((obs[e], int(action[e]), float(reward[e])))
            if term[e] or trunc[e]:
                while w:
                    self._emit(w, next_obs[e], 0.0 if term[e] else None)
                    w.popleft()
            elif len(w) == self.n:
                self._emit(w, next_obs[e], None)
                w.popleft()

    def _emit(self, w, nxt, discount):
        ret, g = 0.0, 1.0
        for _, _, r in w:
            ret += g * r
            g *= self.gamma
        o, a, _ = w[0]
        self.out["obs"].append(o)
        self.out["action"].append(a)
        self.out["reward"].append(ret)
        self.out["next_obs"].append(nxt)
        self.out["discount"].append(g if discount is None else discount)

    def __len__(self):
        return len(self.out["action"])

    def take(self):
        """The rows so far as a dict of arrays (the insert layout); clears them."""
        b = {"obs": np.asarray(self.out["obs"], np.float32),
             "action": np.asarray(self.out["action"], np.int32),
             "reward": np.asarray(self.out["reward"], np.float32),
             "next_obs": np.asarray(self.out["next_obs"], np.float32),
             "discount": np.asarray(self.out["discount"], np.float32)}
        self.out = {k: [] for k in self.FIELDS}
        return b
