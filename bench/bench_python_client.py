#!/usr/bin/python3
"""bench_python_client.py - the Python client (clients/python) against the C
client, same daemon, same workload, same batch and stream count.

Starts the replayd given by --replayd on 127.0.0.1:0 (a fresh state
directory, in a session of its own, with bench_grpc's flags), registers
bench_grpc's CartPole-shaped workload (41-byte rows), then, in R rounds:

  baseline.c_client.insert  bench_c_client: S threads, one connection and
                            Insert stream each, messages of B rows
  python.insert             S threads, one Client and Writer (Insert stream)
                            each, Writer.extend() of a dict of B-row arrays
                            (the Writer's defaults: messages coalesce up to
                            8 B rows while the stream falls behind)
  python.insert_uncoalesced the same with max_message_rows=B: one message
                            per B rows, as the C client sends
  baseline.c_client.sample  bench_c_client: S threads calling Sample(B)
  python.sample             S threads, one Client each, Workload.sample(B)
                            (keys, probabilities, weights, numpy columns)
  python.sample_prefetch    the same through Workload.sampler(B, prefetch=2)
  baseline.c_client.sample_stream
                            bench_c_client: S threads, each a sampler
                            (SampleStream, window 8) taking batches of B
  python.sample_stream      S threads, Workload.sampler(B, prefetch=8,
                            stream=True): the same stream from Python

Each figure is the median of the rounds (transitions/s); the ratio lines
are python / C of the same round's medians. Prints a table, or with --json
one JSON object per line.

usage: bench_python_client.py --replayd PATH [--c-client PATH] [--json] [--quick]
                              [--streams S] [--batch B] [--seconds T] [--rounds R]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# The Python examples' daemon of their own and their import of replayd
# (installed, or built from this source tree).
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "examples"))
from common import LocalDaemon, import_replayd  # noqa: E402


def cpu_facts():
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "baseline"
    return model, isa, os.cpu_count()


def load_average():
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except OSError:
        return "?"


def cartpole_batch(np, n):
    i = np.arange(n)
    obs = (i[:, None] + np.arange(4)[None, :]).astype(np.float32)
    return {"obs": obs, "action": (i & 1).astype(np.int32), "reward": np.ones(n, np.float32),
            "next_obs": obs.copy(), "done": (i % 200) == 199}


def run_threads(fn, streams, seconds):
    """fn(t_end) -> items in each of `streams` threads; items/s overall."""
    items = [0] * streams
    errors = []
    t0 = time.monotonic()
    t_end = t0 + seconds

    def body(k):
        try:
            items[k] = fn(t_end)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    th = [threading.Thread(target=body, args=(k,)) for k in range(streams)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if errors:
        raise errors[0]
    return sum(items) / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replayd", required=True)
    ap.add_argument("--c-client", default=None,
                    help="bench_c_client (default: next to the daemon's build, bench/)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", metavar="FILE", default=None,
                    help="cProfile the Python insert and sample loops into FILE (.insert/.sample)")
    a = ap.parse_args()
    if a.quick:
        a.seconds, a.rounds = 0.5, 1
    if not 1 <= a.streams <= 64 or a.batch < 1 or a.seconds <= 0 or a.rounds < 1:
        ap.error("streams 1..64, batch >= 1, seconds > 0, rounds >= 1")
    cexe = a.c_client or os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(a.replayd))), "bench", "bench_c_client")
    if not os.access(cexe, os.X_OK):
        ap.error(f"no C client benchmark at {cexe} (ninja -C BUILD bench/bench_c_client)")

    replayd = import_replayd()
    import numpy as np

    d = LocalDaemon(a.replayd, "--threads", "2", "--max-memory", "4G")
    try:
        admin = replayd.Client(d.address)
        spec = replayd.Spec(name="bench-cartpole", capacity=1 << 20, fields={
            "obs": (np.float32, (4,)), "action": np.int32, "reward": np.float32,
            "next_obs": (np.float32, (4,)), "done": bool})
        w0 = admin.register(spec)
        wid, token = w0.id, w0.token
        batch = cartpole_batch(np, a.batch)

        def c_run(op):
            out = subprocess.run([cexe, d.address, wid, token, op, str(a.streams), str(a.batch),
                                  str(a.seconds)], capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise SystemExit(f"bench_c_client {op} failed: {out.stderr.strip()}")
            items, secs = out.stdout.split()
            return int(items) / float(secs)

        def py_insert(t_end, coalesce=True):
            with replayd.Client(d.address, timeout=60) as c:
                w = c.workload(wid, token)
                wr = w.writer(max_rows=a.batch, max_seconds=None,
                              max_message_rows=None if coalesce else a.batch)
                n = 0
                while time.monotonic() < t_end:
                    wr.extend(batch)
                    n += a.batch
                r = wr.close()
                if r.inserted != n:
                    raise SystemExit(f"python insert: sent {n} rows, daemon took {r.inserted}")
                return n

        def py_sample(t_end):
            with replayd.Client(d.address, timeout=30) as c:
                w = c.workload(wid, token)
                w.spec  # the schema, read once before the loop
                n = 0
                while time.monotonic() < t_end:
                    s = w.sample(a.batch)
                    n += len(s)
                return n

        def py_sampler(t_end, stream=False):
            with replayd.Client(d.address, timeout=30) as c:
                w = c.workload(wid, token)
                n = 0
                with w.sampler(a.batch, prefetch=8 if stream else 2, stream=stream) as it:
                    for s in it:
                        n += len(s)
                        if time.monotonic() >= t_end:
                            break
                return n

        runs = [("baseline.c_client.insert", lambda: c_run("insert")),
                ("python.insert", lambda: run_threads(py_insert, a.streams, a.seconds)),
                ("python.insert_uncoalesced",
                 lambda: run_threads(lambda t: py_insert(t, False), a.streams, a.seconds)),
                ("baseline.c_client.sample", lambda: c_run("sample")),
                ("python.sample", lambda: run_threads(py_sample, a.streams, a.seconds)),
                ("python.sample_prefetch", lambda: run_threads(py_sampler, a.streams, a.seconds)),
                ("baseline.c_client.sample_stream", lambda: c_run("stream")),
                ("python.sample_stream", lambda: run_threads(
                    lambda t_end: py_sampler(t_end, stream=True), a.streams, a.seconds))]
        if a.profile:
            import cProfile
            for name, fn in (("insert", py_insert), ("sample", py_sample)):
                prof = cProfile.Profile()
                prof.enable()
                fn(time.monotonic() + a.seconds)
                prof.disable()
                prof.dump_stats(f"{a.profile}.{name}")
        res = {name: [] for name, _ in runs}
        loads = [load_average()]
        for _ in range(a.rounds):
            for name, fn in runs:
                res[name].append(fn())
            loads.append(load_average())
        med = {k: statistics.median(v) for k, v in res.items()}
    finally:
        d.stop()

    model, isa, cpus = cpu_facts()
    params = {"batch": a.batch, "streams": a.streams}
    lines = [(k, med[k], "transitions/s") for k in res]
    lines.append(("python.insert_vs_c", med["python.insert"] / med["baseline.c_client.insert"],
                  "ratio"))
    lines.append(("python.sample_vs_c", med["python.sample"] / med["baseline.c_client.sample"],
                  "ratio"))
    lines.append(("python.sample_stream_vs_c", med["python.sample_stream"] /
                  med["baseline.c_client.sample_stream"], "ratio"))
    if a.json:
        for name, v, unit in lines:
            print(json.dumps({"name": name, "params": params, "value": float(f"{v:.6g}"),
                              "unit": unit}))
    else:
        print(f"# bench_python_client: {model} ({isa}, {cpus} CPUs), load average "
              f"{' -> '.join(loads)}, {a.rounds} round(s) of {a.seconds:g} s, medians; "
              f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
        print(f"{'name':<28} {'batch':>6} {'streams':>8} {'value':>16}")
        for name, v, unit in lines:
            print(f"{name:<28} {a.batch:>6} {a.streams:>8} {v:>16.2f} {unit}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
