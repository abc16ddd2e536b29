#!/usr/bin/python3
"""Prometheus metrics (issue 26, item 1), on the real replayd: Debian's
real `prometheus` server scrapes the daemon's --metrics-listen endpoint and
its HTTP API must answer the inserts this test made; the exposition passes
`promtool check metrics`; per-workload counters, gauges, a hosted learner's
series and the RPC histograms say what the test did; a deleted workload's
series go away (in the scrape, and stale in Prometheus); the endpoint is
off unless asked for, on loopback by default, and serves /metrics only.

usage: test_metrics.py REPLAYD_EXE PROTO_DIR
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import Daemon, pb, TOKEN_KEY, grpc, cartpole_spec, rows, run_replayd  # noqa: E402

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
NO_PROMETHEUS = ("Debian's prometheus package is not installed (scripts/install-deps installs "
                 "it; apt-get install prometheus)")


def get(url, method="GET", data=None):
    """(status, headers, body) of an HTTP request."""
    req = urllib.request.Request(url, method=method, data=data)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def parse(text):
    """{(name, frozenset(labels)): value} of a text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        assert m, line
        labels = frozenset(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def series(parsed, name, **labels):
    want = frozenset(labels.items())
    return [v for (n, ls), v in parsed.items() if n == name and want <= ls]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MetricsBase(unittest.TestCase):
    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-metrics-")
        self.d = Daemon(self.state, "--metrics-listen", "0")
        m = re.search(r"metrics on http://([0-9.]+):(\d+)/metrics", self.d.log_after("metrics on"))
        self.assertIsNotNone(m, "no 'metrics on' line")
        self.assertEqual(m.group(1), "127.0.0.1", "the endpoint must default to loopback")
        self.metrics_target = f"127.0.0.1:{m.group(2)}"
        self.url = f"http://{self.metrics_target}/metrics"

    def tearDown(self):
        if self.d.alive():
            self.assertEqual(self.d.stop(), 0)
        shutil.rmtree(self.state, ignore_errors=True)

    def scrape(self):
        status, headers, body = get(self.url)
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/plain; version=0.0.4"))
        return body

    def md(self, w):
        return ((TOKEN_KEY, w.token),)

    def insert(self, w, n, start=0):
        self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(n, start)),
                                metadata=self.md(w), timeout=10)


class TestEndpoint(MetricsBase):
    def test_counters_gauges_and_histograms(self):
        spec = cartpole_spec(capacity=400)
        spec.name = 'a "quoted" \\ name'
        w = self.d.stub.RegisterWorkload(spec, timeout=10)
        for i in range(3):
            self.insert(w, 100, 100 * i)

        def stream():
            for i in range(4):
                yield pb.InsertRequest(workload_id=w.id, rows=rows(50, 300 + 50 * i))
        self.d.stub.Insert(stream(), metadata=self.md(w), timeout=10)
        s = self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=64),
                               metadata=self.md(w), timeout=10)
        u = self.d.stub.UpdatePriorities(
            pb.UpdatePrioritiesRequest(workload_id=w.id, keys=[0, 1, 499],
                                       priorities=[1.0, 2.0, 3.0]),
            metadata=self.md(w), timeout=10)
        self.assertEqual(u.stale, 2)  # 500 rows in 400 slots: keys 0 and 1 were overwritten
        with self.assertRaises(grpc.RpcError):
            self.d.stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=4),
                               metadata=((TOKEN_KEY, "0" * 64),), timeout=10)

        text = self.scrape()
        if PROMTOOL:
            lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, text=True,
                                  capture_output=True)
            self.assertEqual(lint.returncode, 0, lint.stdout + lint.stderr)
        p = parse(text)
        self.assertEqual(series(p, "replayd_inserts_total", workload=w.id), [500])
        self.assertEqual(series(p, "replayd_samples_total", workload=w.id), [64])
        self.assertEqual(series(p, "replayd_updates_total", workload=w.id), [1])
        self.assertEqual(series(p, "replayd_stale_updates_total", workload=w.id), [2])
        self.assertEqual(series(p, "replayd_table_items", workload=w.id), [400])
        self.assertEqual(series(p, "replayd_table_capacity_items", workload=w.id), [400])
        self.assertGreater(series(p, "replayd_table_bytes", workload=w.id)[0], 400 * 41)
        self.assertEqual(series(p, "replayd_workloads"), [1])
        # The name is a label value, escaped.
        self.assertIn('name="a \\"quoted\\" \\\\ name"', text)
        # RPCs: every call of the test counted once; failures by status.
        self.assertEqual(series(p, "replayd_rpc_duration_seconds_count", method="InsertBatch"),
                         [3])
        self.assertEqual(series(p, "replayd_rpc_duration_seconds_count", method="Insert"), [4])
        self.assertEqual(series(p, "replayd_rpc_duration_seconds_count", method="Sample"), [2])
        self.assertEqual(series(p, "replayd_rpc_duration_seconds_bucket", method="Sample",
                                le="+Inf"), [2])
        self.assertGreater(series(p, "replayd_rpc_duration_seconds_sum", method="Sample")[0], 0)
        self.assertEqual(series(p, "replayd_rpc_failures_total", method="Sample",
                                code="PERMISSION_DENIED"), [1])
        buckets = [(float(dict(ls)["le"]), v) for (n, ls), v in p.items()
                   if n == "replayd_rpc_duration_seconds_bucket"
                   and dict(ls)["method"] == "InsertBatch"]
        buckets.sort()
        self.assertEqual([v for _, v in buckets], sorted(v for _, v in buckets),
                         "buckets must be cumulative")
        self.assertEqual(series(p, "replayd_device_up", kind="cpu"), [1])
        self.assertEqual(series(p, "replayd_device_workload_parts", kind="cpu", part="replay"),
                         [1])
        self.assertEqual(series(p, "replayd_server_calls_total"), [8])  # this test's calls
        self.assertGreater(series(p, "process_resident_memory_bytes")[0], 0)

        # Deleted: its series are gone from the next scrape.
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=self.md(w), timeout=10)
        p = parse(self.scrape())
        self.assertEqual([k for k in p if ("workload", w.id) in k[1]], [])
        self.assertEqual(series(p, "replayd_workloads"), [0])

    def test_hosted_learner(self):
        spec = cartpole_spec(capacity=2000, learner=pb.LearnerSpec(
            algorithm="dqn", hidden=[16], batch_size=32, num_actions=2))
        w = self.d.stub.RegisterWorkload(spec, timeout=60)
        self.insert(w, 256)
        t = self.d.stub.TrainStep(pb.TrainStepRequest(workload_id=w.id, steps=20),
                                  metadata=self.md(w), timeout=60)
        self.assertEqual(t.steps_done, 20)
        p = parse(self.scrape())
        self.assertEqual(series(p, "replayd_learner_steps_total", workload=w.id), [20])
        self.assertEqual(series(p, "replayd_learner_weight_version", workload=w.id),
                         [t.weight_version])
        self.assertGreater(series(p, "replayd_learner_steps_per_second", workload=w.id)[0], 0)
        self.assertEqual(len(series(p, "replayd_learner_loss", workload=w.id)), 1)
        self.assertEqual(len(series(p, "replayd_learner_queued_batches", workload=w.id)), 2)
        self.assertEqual(series(p, "replayd_learner_batches_in_flight", workload=w.id), [0])
        placed = [dict(ls) for (n, ls), v in p.items()
                  if n == "replayd_workload_placement_info"]
        self.assertEqual(len(placed), 1)
        self.assertRegex(placed[0]["running"], r"^[CGF-]-[CGF]-[CGF]$")
        self.assertEqual(series(p, "replayd_device_workload_parts", kind="cpu", part="learner"),
                         [1])
        self.assertEqual(series(p, "replayd_rpc_duration_seconds_count", method="TrainStep"), [1])
        hits = series(p, "replayd_profile_cache_hits_total")[0]
        misses = series(p, "replayd_profile_cache_misses_total")[0]
        self.assertEqual(hits + misses, 1, "one placement, one lookup")
        # The same shape again: a hit.
        self.d.stub.RegisterWorkload(spec, timeout=60)
        p = parse(self.scrape())
        self.assertEqual(series(p, "replayd_profile_cache_hits_total"), [hits + 1])

    def test_only_get_metrics(self):
        base = f"http://{self.metrics_target}"
        self.assertEqual(get(base + "/")[0], 404)
        self.assertEqual(get(base + "/metrics/x")[0], 404)
        status, headers, _ = get(self.url, method="POST", data=b"x" * 100)
        self.assertEqual(status, 405)
        self.assertEqual(headers["Allow"], "GET, HEAD")
        status, _, body = get(self.url, method="HEAD")
        self.assertEqual((status, body), (200, ""))
        self.scrape()  # still serving


class TestPrometheus(MetricsBase):
    """Debian's prometheus scrapes the daemon; its query API must answer
    what was inserted."""

    def setUp(self):
        if PROMETHEUS is None:
            self.skipTest(NO_PROMETHEUS)
        super().setUp()
        self.prom_dir = tempfile.mkdtemp(prefix="replayd-prom-")
        cfg = os.path.join(self.prom_dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: replayd\n    static_configs:\n"
                    f"      - targets: ['{self.metrics_target}']\n")
        self.prom_port = free_port()
        self.prom_log = open(os.path.join(self.prom_dir, "log"), "w+")
        self.prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={cfg}",
             f"--storage.tsdb.path={os.path.join(self.prom_dir, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.prom_port}"],
            stdout=self.prom_log, stderr=subprocess.STDOUT)
        self.api = f"http://127.0.0.1:{self.prom_port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if get(self.api + "/-/ready")[0] == 200:
                    break
            except OSError:
                pass
            if self.prom.poll() is not None or time.monotonic() > deadline:
                self.fail("prometheus did not start:\n" + self.prom_output())
            time.sleep(0.2)

    def prom_output(self):
        self.prom_log.seek(0)
        return self.prom_log.read()[-4000:]

    def tearDown(self):
        if hasattr(self, "prom"):
            self.prom.terminate()
            self.prom.wait(30)
            self.prom_log.close()
            shutil.rmtree(self.prom_dir, ignore_errors=True)
        super().tearDown()

    def query(self, q):
        status, _, body = get(self.api + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        self.assertEqual(status, 200, body)
        r = json.loads(body)
        self.assertEqual(r["status"], "success", body)
        return r["data"]["result"]

    def wait_query(self, q, ok, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            res = self.query(q)
            if ok(res):
                return res
            if time.monotonic() > deadline:
                self.fail(f"{q}: {res} after {timeout} s\n" + self.prom_output())
            time.sleep(0.5)

    def test_prometheus_scrapes_inserted_rows(self):
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=10000), timeout=10)
        inserted = 0
        for n in (100, 250, 7, 1000):
            self.insert(w, n, inserted)
            inserted += n
        q = f'replayd_inserts_total{{job="replayd",workload="{w.id}"}}'
        res = self.wait_query(q, lambda r: r and r[0]["value"][1] == str(inserted))
        self.assertEqual(len(res), 1)
        self.assertEqual(int(res[0]["value"][1]), inserted)
        self.assertEqual(self.query('up{job="replayd"}')[0]["value"][1], "1")
        # Prometheus parsed the histogram as one.
        self.wait_query('histogram_quantile(0.5, rate(replayd_rpc_duration_seconds_bucket'
                        '{method="InsertBatch"}[1m]))', lambda r: len(r) == 1)
        # Deleted: the daemon drops its series and Prometheus marks them stale.
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=self.md(w), timeout=10)
        self.wait_query(q, lambda r: r == [], timeout=30)


class TestOffAndRefusals(unittest.TestCase):
    def test_off_unless_set(self):
        state = tempfile.mkdtemp(prefix="replayd-metrics-")
        try:
            d = Daemon(state)
            log = d.log_after("listening on")
            self.assertNotIn("metrics on", log)
            self.assertEqual(d.stop(), 0)
        finally:
            shutil.rmtree(state, ignore_errors=True)

    def test_bad_addresses_stop_the_start(self):
        state = tempfile.mkdtemp(prefix="replayd-metrics-")
        try:
            for bad, text in (("nonsense", "expected PORT"), ("127.0.0.1:70000", "0..65535"),
                              ("::1:9464", "brackets"), ("192.0.2.1:0", "cannot listen")):
                r = run_replayd(state, "--metrics-listen", bad)
                self.assertEqual(r.returncode, 1, bad + ": " + r.stderr)
                self.assertIn(text, r.stderr, bad)
            # A port already taken.
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                s.listen(1)
                r = run_replayd(state, "--metrics-listen", str(s.getsockname()[1]))
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("cannot listen for metrics", r.stderr)
        finally:
            shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
