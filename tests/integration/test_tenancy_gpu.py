"""A tenant's GPU-memory quota against the real replayd (api/replayd.proto,
TenantQuota.max_gpu_memory_bytes):

- AddTenant / SetTenant / ListTenants carry it, replayctl tenant add | set
  take max-gpu-memory=BYTES[K|M|G|T] and show it, bad values are refused
  by the command line (exit 2), and it persists across a restart (store
  migration 4 -> 5);
- a workload the placement keeps on the CPU takes no GPU memory: a tenant
  with a 1-byte GPU quota still registers it, and nothing is charged.

Admission on a GPU placement needs a GPU provider, so it is tested without
one in tests/test_registry.c (test_learner_gpu_quota).

usage: test_tenancy_gpu.py REPLAYD_EXE PROTO_DIR REPLAYCTL
"""
import json
import unittest

import test_tenancy as tt  # takes REPLAYCTL from argv, as its own main does
from test_tenancy import Daemon, pb


class TestGpuQuota(tt.TenantCase):
    def test_quota_rpcs_replayctl_restart(self):
        t = self.add("a", max_gpu_memory_bytes=3 << 30)
        ts = self.tenants()
        self.assertEqual(ts["a"].quota.max_gpu_memory_bytes, 3 << 30)
        self.assertEqual(ts["a"].gpu_memory_bytes, 0)
        self.d.stub.SetTenant(pb.SetTenantRequest(name="a", max_gpu_memory_bytes=1),
                              metadata=self.admin_md, timeout=10)
        # Only the field set changes.
        self.d.stub.SetTenant(pb.SetTenantRequest(name="a", weight=2), metadata=self.admin_md,
                              timeout=10)
        a = self.tenants()["a"]
        self.assertEqual((a.quota.max_gpu_memory_bytes, a.quota.weight), (1, 2))
        # On the CPU: no GPU memory, whatever the GPU quota.
        w = self.register(t.token)
        a = self.tenants()["a"]
        self.assertEqual((a.workloads, a.gpu_memory_bytes), (1, 0))
        self.assertGreater(a.memory_bytes, 0)

        self.ctl("tenant", "add", "b", "max-gpu-memory=2G", "weight=3")
        self.assertEqual(self.tenants()["b"].quota.max_gpu_memory_bytes, 2 << 30)
        j = json.loads(self.ctl("--json", "tenant", "set", "b", "max-gpu-memory=512M").stdout)
        self.assertEqual((j["max_gpu_memory_bytes"], j["weight"], j["gpu_memory_bytes"]),
                         (512 << 20, 3, 0))
        self.assertIn("GPU MEMORY", self.ctl("tenant", "ls").stdout)
        for bad in ("max-gpu-memory=-1", "max-gpu-memory=1X", "max-gpu-memory=",
                    "max-gpu-memory=99999999999T"):
            r = self.ctl("tenant", "set", "b", bad, ok=False)
            self.assertEqual(r.returncode, 2, f"{bad}: {r.stderr}")
        self.assertEqual(self.tenants()["b"].quota.max_gpu_memory_bytes, 512 << 20)

        self.assertEqual(self.d.stop(), 0)
        self.d = Daemon(self.state)
        ts = self.tenants()
        self.assertEqual((ts["a"].quota.max_gpu_memory_bytes, ts["b"].quota.max_gpu_memory_bytes),
                         (1, 512 << 20))
        self.assertEqual((ts["a"].workloads, ts["a"].gpu_memory_bytes), (1, 0))
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=w.id), metadata=tt.md(t.token), timeout=10)


if __name__ == "__main__":
    unittest.main(verbosity=2)
