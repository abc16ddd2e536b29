#!/usr/bin/python3
"""Ape-X DQN on CartPole: actor processes feed replayd, a PyTorch learner
samples, trains and updates priorities remotely.

    clients/python/examples/apex_dqn.py --replayd build/daemon/replayd

Horgan et al. 2018 (papers/003), on one machine:

- N actor processes each run a few CartPoles (numpy), act epsilon-greedily
  with Ape-X's per-actor epsilon (0.4^(1 + 7 i/(N-1))) on their copy of the
  Q network, build 3-step rows and send them with priorities they compute
  themselves (|n-step TD error| under their copy) through a Writer (one
  Insert stream each);
- the learner (this process, PyTorch) iterates a Sampler (batches of 64
  already in flight), takes a double-DQN step (Huber loss weighted by the
  IS weights, Adam, Polyak target), and writes |TD error| back with
  update_priorities; every 50 steps it publishes its weights (the RDNN
  format replayd's hosted learners use) to the actors, which pull them
  every 400 environment steps;
- actors wait while they are more than --max-lag rows ahead of the
  learner's ratio of 32 samples per inserted row, and the learner waits
  while it is ahead of it, as the daemon's own continuous mode does.

Every --eval-every seconds the learner's network plays --eval-episodes
greedy episodes; the run ends when their mean return reaches --target
(exit 0) or at --time-limit (exit 1). Progress goes to stderr and, as
`wall_s,env_steps,train_steps,eval_mean_return`, to --out.

Use --server HOST:PORT for a daemon that is already running instead of
starting one; needs python3-torch (Debian) and replayd (installed, or
found in this source tree).
"""
import copy
import os
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

HIDDEN = (64, 64)
BATCH = 64
GAMMA = 0.99
N_STEP = 3
MIN_SIZE = 1000
SAMPLES_PER_INSERT = 32.0
PUBLISH_EVERY = 50
PULL_EVERY = 400


def rdnn_bytes(net):
    """The torch Sequential's Linear layers in the flat RDNN format
    (common/rd_nn_spec.h): ReLU after each hidden layer, identity out."""
    import torch
    lin = [m for m in net.modules() if isinstance(m, torch.nn.Linear)]
    sizes = [lin[0].in_features] + [m.out_features for m in lin]
    acts = [1] * (len(lin) - 1) + [0]
    head = struct.pack(f"<3I{len(sizes)}I{len(acts)}I", 0x4E4E4452, 1, len(lin), *sizes, *acts)
    with torch.no_grad():
        body = b"".join(m.weight.numpy().astype("<f4").tobytes() +
                        m.bias.numpy().astype("<f4").tobytes() for m in lin)
    return head + body


def priorities(q_net, b):
    """|R + discount * max_a Q(next_obs, a) - Q(obs, action)| under the actor's copy."""
    q = q_net.forward(b["obs"])[np.arange(len(b["action"])), b["action"]]
    boot = q_net.forward(b["next_obs"]).max(axis=1)
    return np.abs(b["reward"] + b["discount"] * boot - q).astype(np.float64)


def actor(address, wid, token, index, n_actors, envs, seed, shared, cfg):
    """One actor process (see the module docstring)."""
    replayd = common.import_replayd()
    buf, buf_len, version, steps, inserted, lock, stop = shared
    rng = np.random.default_rng(seed * 1000 + index)
    eps = common.apex_epsilon(0.4, index, n_actors)
    env = common.VecCartPole(envs, seed * 1000 + index)
    ns = common.NStep(envs, N_STEP, GAMMA)
    net, have = None, 0
    client = replayd.Client(address, timeout=60)
    w = client.workload(wid, token)
    since_pull = PULL_EVERY
    with w.writer(max_rows=256, max_seconds=0.5) as writer:
        while not stop.is_set():
            if since_pull >= PULL_EVERY and version.value != have:
                with lock:
                    raw, have = bytes(buf[:buf_len.value]), version.value
                net = replayd.parse_weights(raw, have)
                since_pull = 0
            common.actor_step(env, ns, net, rng, eps)
            since_pull += envs
            if len(ns) >= 64:
                b = ns.take()
                writer.extend(b, priorities(net, b) if net is not None else None)
                with inserted.get_lock():
                    inserted.value += len(b["action"])
                # Ahead of the learner's ratio by more than max_lag rows: wait.
                while not stop.is_set():
                    consumed = steps.value * BATCH / SAMPLES_PER_INSERT
                    if inserted.value - MIN_SIZE - consumed <= cfg["max_lag"]:
                        break
                    time.sleep(0.005)
    client.close()


def main():
    a = common.parse_args(__doc__, time_limit=900.0, out="apex_dqn.csv")

    import torch
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    replayd, daemon, address, ctx, stop = common.session(a)
    procs = []
    t0 = time.monotonic()
    try:
        client = replayd.Client(address, timeout=60)
        w = client.register(replayd.Spec(name="apex-dqn-cartpole", fields=common.NStep.FIELDS,
                                         capacity=100_000, alpha=0.6, beta=0.4, seed=a.seed))
        q = torch.nn.Sequential(torch.nn.Linear(4, HIDDEN[0]), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN[0], HIDDEN[1]), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN[1], common.N_ACTIONS))
        target = copy.deepcopy(q)
        opt = torch.optim.Adam(q.parameters(), lr=1e-3)
        raw = rdnn_bytes(q)
        buf = ctx.Array("B", len(raw), lock=False)
        buf_len, version = ctx.Value("Q", len(raw), lock=False), ctx.Value("Q", 0, lock=False)
        steps, inserted, lock = ctx.Value("Q", 0, lock=False), ctx.Value("Q", 0), ctx.Lock()

        def publish():
            data = rdnn_bytes(q)
            with lock:
                buf[:len(data)] = data
                version.value += 1

        publish()
        shared = (buf, buf_len, version, steps, inserted, lock, stop)
        common.start_actors(ctx, actor, a.actors,
                            lambda i: (address, w.id, w.token, i, a.actors, a.envs_per_actor,
                                       a.seed, shared, {"max_lag": a.max_lag}), procs)

        def policy(obs):
            with torch.no_grad():
                return q(torch.from_numpy(obs)).numpy()

        out = open(a.out, "w")
        out.write("wall_s,env_steps,train_steps,eval_mean_return\n")
        print(f"apex_dqn: {a.actors} actors x {a.envs_per_actor} CartPoles on {address}, "
              f"workload {w.id}; target {a.target}", file=sys.stderr)
        while inserted.value < MIN_SIZE:
            if any(not p.is_alive() for p in procs):
                raise SystemExit("apex_dqn: an actor exited")
            time.sleep(0.05)
        next_eval = a.eval_every
        n = 0
        huber = torch.nn.SmoothL1Loss(reduction="none")
        sampler = w.sampler(BATCH, prefetch=2)
        for batch in sampler:
            b = batch.to_torch()
            with torch.no_grad():
                best = q(b["next_obs"]).argmax(1, keepdim=True)
                y = b["reward"] + b["discount"] * target(b["next_obs"]).gather(1, best).squeeze(1)
            qa = q(b["obs"]).gather(1, b["action"].long().unsqueeze(1)).squeeze(1)
            td = y - qa
            loss = (b["weights"] * huber(qa, y)).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(q.parameters(), 10.0)
            opt.step()
            with torch.no_grad():
                for pt, p in zip(target.parameters(), q.parameters()):
                    pt.mul_(0.99).add_(p, alpha=0.01)
            w.update_priorities(batch.keys, td.detach().abs().numpy())
            n += 1
            steps.value = n
            if n % PUBLISH_EVERY == 0:
                publish()
            # Ahead of the data (samples per inserted row above the ratio): wait.
            while n * BATCH / SAMPLES_PER_INSERT > inserted.value - MIN_SIZE + BATCH:
                time.sleep(0.002)
            wall = time.monotonic() - t0
            if wall >= next_eval:
                next_eval = wall + a.eval_every
                mean = common.evaluate(policy, a.eval_episodes)
                wall = time.monotonic() - t0
                line = f"{wall:.1f},{inserted.value},{n},{mean:.1f}"
                out.write(line + "\n")
                out.flush()
                print(f"apex_dqn: {line}", file=sys.stderr)
                if mean >= a.target:
                    print(f"apex_dqn: reached the target {a.target} (mean return {mean:.1f} over "
                          f"{a.eval_episodes} episodes) after {wall:.1f}s, {inserted.value} env "
                          f"steps, {n} train steps", file=sys.stderr)
                    sampler.close()
                    return 0
                if wall >= a.time_limit:
                    print(f"apex_dqn: time limit {a.time_limit}s reached", file=sys.stderr)
                    sampler.close()
                    return 1
            if any(not p.is_alive() for p in procs):
                raise SystemExit("apex_dqn: an actor exited")
        return 1
    finally:
        common.stop_all(stop, procs, daemon)


if __name__ == "__main__":
    sys.exit(main())
