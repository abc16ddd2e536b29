#!/usr/bin/python3
"""bench_fuzz.py - what scripts/test's fuzz stage does in one run: the
executions each libFuzzer harness (tests/fuzz) gets in its time, and the
crashes it finds (the issue asks for zero).

Runs scripts/fuzz (clang-14, ASan+UBSan, build-fuzz) with FUZZ_SECONDS
(--seconds, default 20 as CI; --quick 2) and reads its per-harness lines.
Reported, one object per harness and the sum:
  fuzz.executions   executions of HARNESS in SECONDS s (unit: executions)
  fuzz.failed       harnesses that crashed, leaked or timed out (unit: harnesses)

usage: bench_fuzz.py [--json] [--quick] [--seconds S]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_python_client import cpu_facts, load_average  # noqa: E402

LINE = re.compile(r"^fuzz (\S+): (\d+) executions in (\d+) s: (.*)$")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seconds", type=int, default=None)
    a = ap.parse_args()
    seconds = a.seconds if a.seconds is not None else (2 if a.quick else 20)
    model, isa, cpus = cpu_facts()
    load = load_average()
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    env = dict(os.environ, FUZZ_SECONDS=str(seconds))
    p = subprocess.run([os.path.join(ROOT, "scripts", "fuzz")], env=env, cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rows = [m.groups() for m in map(LINE.match, p.stderr.splitlines()) if m]
    if not rows:
        sys.stderr.write(p.stderr)
        sys.exit("bench_fuzz: scripts/fuzz ran no harness")
    results = []
    for name, execs, _, result in rows:
        results.append(("fuzz.executions", {"harness": name, "seconds": seconds}, int(execs),
                        "executions"))
    failed = sum(1 for r in rows if r[3] != "ok")
    results.append(("fuzz.executions", {"harness": "all", "seconds": seconds},
                    sum(int(r[1]) for r in rows), "executions"))
    results.append(("fuzz.failed", {"harnesses": len(rows), "seconds": seconds}, failed,
                    "harnesses"))
    if a.json:
        for name, params, value, unit in results:
            print(json.dumps({"name": name, "params": params, "value": value, "unit": unit}))
    else:
        print(f"# bench_fuzz: clang-14 libFuzzer, ASan+UBSan, {seconds} s per harness, "
              f"started {when}, {model}, ISA {isa}, "
              f"{cpus} CPUs (load {load})")
        print(f"{'harness':<22} {'executions':>12}  result")
        for name, execs, _, result in rows:
            print(f"{name:<22} {int(execs):>12}  {result}")
        print(f"{'all':<22} {results[-2][2]:>12}  {failed} failed")
    sys.exit(1 if failed or p.returncode else 0)


if __name__ == "__main__":
    main()
