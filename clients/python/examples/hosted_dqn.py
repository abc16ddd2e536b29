#!/usr/bin/python3
"""CartPole with replayd's hosted learner: Python actors only insert rows
and pull the policy's weights.

    clients/python/examples/hosted_dqn.py --replayd build/daemon/replayd

The workload is registered with a DQN learner in continuous mode (the
settings of clients/c/examples/learn.sh: 64x64 ReLU, batch 64, Adam 1e-3,
Polyak 0.01, double DQN, 32 samples per inserted row, min_size 1000), so the
daemon trains by itself as rows arrive. N actor processes run CartPoles in
numpy, pull the weights with get_weights(have_version) every 400
environment steps (the flat RDNN format, parsed by replayd.parse_weights)
and act with their numpy forward pass, epsilon-greedily with Ape-X's
per-actor epsilon; they send 3-step rows through a Writer and wait while
they are more than --max-lag rows ahead of the learner (its step count, from
describe()). No learning code runs on this side.

Every --eval-every seconds this process pulls the latest weights, loads them
into a PyTorch module (Weights.to_torch(); without torch, the numpy forward
pass) and plays --eval-episodes greedy episodes; the run ends when their
mean return reaches --target (exit 0) or at --time-limit (exit 1). Progress
goes to stderr and, as `wall_s,env_steps,train_steps,weight_version,
eval_mean_return` (learn.sh's columns), to --out.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PULL_EVERY = 400


def actor(address, wid, token, index, n_actors, envs, seed, max_lag, stop):
    """One actor process (see the module docstring)."""
    replayd = common.import_replayd()
    rng = np.random.default_rng(seed * 1000 + index)
    eps = common.apex_epsilon(0.4, index, n_actors)
    env = common.VecCartPole(envs, seed * 1000 + index)
    ns = common.NStep(envs, 3, 0.99)
    client = replayd.Client(address, timeout=60)
    w = client.workload(wid, token)
    learner = w.spec.learner
    net, since_pull, sent = None, PULL_EVERY, 0
    with w.writer(max_rows=256, max_seconds=0.5) as writer:
        while not stop.is_set():
            if since_pull >= PULL_EVERY:
                newer = w.get_weights(have_version=net.version if net else 0)
                net = newer or net
                since_pull = 0
            common.actor_step(env, ns, net, rng, eps)
            since_pull += envs
            if len(ns) >= 64:
                b = ns.take()
                writer.extend(b)
                sent += len(b["action"])
                if sent % 1024 < 64:  # now and then: wait while ahead of the learner
                    while not stop.is_set():
                        d = w.describe()
                        consumed = d.learner.steps * learner.batch_size / learner.samples_per_insert
                        if d.counters.inserts - learner.min_size - consumed <= max_lag:
                            break
                        time.sleep(0.005)
    client.close()


def main():
    a = common.parse_args(__doc__, time_limit=600.0, out="hosted_dqn.csv")

    replayd, daemon, address, ctx, stop = common.session(a)
    procs = []
    t0 = time.monotonic()
    try:
        client = replayd.Client(address, timeout=60)
        w = client.register(replayd.Spec(
            name="hosted-dqn-cartpole", fields=common.NStep.FIELDS, capacity=100_000,
            alpha=0.6, beta=0.4, seed=a.seed,
            learner=replayd.Learner(algorithm="dqn", hidden=(64, 64), activation="relu",
                                    batch_size=64, num_actions=common.N_ACTIONS, lr=1e-3,
                                    gamma=0.99, tau=0.01, double_dqn=True, grad_clip=10.0,
                                    samples_per_insert=32.0, min_size=1000)))
        p = w.describe().placement
        print(f"hosted_dqn: {a.actors} actors x {a.envs_per_actor} CartPoles on {address}, "
              f"workload {w.id}, running {p.running if p else '?'}; target {a.target}",
              file=sys.stderr)
        common.start_actors(ctx, actor, a.actors,
                            lambda i: (address, w.id, w.token, i, a.actors, a.envs_per_actor,
                                       a.seed, a.max_lag, stop), procs)
        try:
            import torch
            torch.set_num_threads(1)
        except ImportError:
            torch = None
        out = open(a.out, "w")
        out.write("wall_s,env_steps,train_steps,weight_version,eval_mean_return\n")
        while True:
            time.sleep(max(0.0, a.eval_every - (time.monotonic() - t0) % a.eval_every))
            if any(not pr.is_alive() for pr in procs):
                raise SystemExit("hosted_dqn: an actor exited")
            weights = w.get_weights()
            if torch is not None:
                net = weights.to_torch()

                def policy(obs):
                    with torch.no_grad():
                        return net(torch.from_numpy(obs)).numpy()
            else:
                policy = weights.forward
            mean = common.evaluate(policy, a.eval_episodes)
            d = w.describe()
            wall = time.monotonic() - t0
            line = (f"{wall:.1f},{d.counters.inserts},{d.learner.steps},{weights.version},"
                    f"{mean:.1f}")
            out.write(line + "\n")
            out.flush()
            print(f"hosted_dqn: {line}", file=sys.stderr)
            if mean >= a.target:
                print(f"hosted_dqn: reached the target {a.target} (mean return {mean:.1f} over "
                      f"{a.eval_episodes} episodes) after {wall:.1f}s", file=sys.stderr)
                return 0
            if wall >= a.time_limit:
                print(f"hosted_dqn: time limit {a.time_limit}s reached", file=sys.stderr)
                return 1
    finally:
        common.stop_all(stop, procs, daemon)


if __name__ == "__main__":
    sys.exit(main())
