#!/usr/bin/python3
"""Paging and bounded replies (issue 20, item 7), against the real replayd:
with --max-message-bytes 64K, 40 registrations with long names once made
ListWorkloads and ServerInfo fail for every client ("Sent message larger
than max"). ListWorkloads and ListProfiles page (page_size, page_token;
keyset: nothing that stays is skipped or repeated), every page and
ServerInfo stay within the limit, and replayctl ls/profiles/status see
everything across pages.

usage: test_paging.py REPLAYD_EXE PROTO_DIR REPLAYCTL_EXE
"""
import json
import os
import random
import sys
import unittest

REPLAYCTL = os.path.abspath(sys.argv[3])
del sys.argv[3:4]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import TOKEN_KEY, DaemonCase, grpc, pb  # noqa: E402

LIMIT_64K = 64 << 10
LIMIT_4K = 4 << 10


def long_spec(i):
    """A valid spec of about 2.5 KB: a long name and 32 long field names."""
    fields = [pb.Field(name=f"f{j:02d}_" + "x" * 56, dtype=pb.FLOAT32, shape=[2])
              for j in range(32)]
    return pb.WorkloadSpec(name=f"w{i:03d} " + "long name " * 24, fields=fields, capacity=16,
                           seed=i)


def profile_line(i, build_len=40):
    """A JSON line of a valid profile; the key differs for every i."""
    fps = ["cpu-00000000000000aa", "cpu-00000000000000bb", "gpu-00000000000000aa"]
    prims = ["sample", "update", "train"]
    return json.dumps({
        "device": fps[i % 3], "primitive": prims[(i // 3) % 3], "threads": 1 + (i // 9) % 4,
        "batch": 1 + i // 36, "capacity": 100000, "fanout": 16, "algorithm": "dqn",
        "network": "dqn:4-64-2", "build": f"b{i % 2} " + "~" * build_len,
        "latency_s": 1e-6 * (i + 1), "reps": 7, "items": 100000, "source": "measured",
        "measured_unix": 1700000000}, separators=(",", ":")) + "\n"


def profile_key(p):
    """The listing's order: device, algorithm, network, batch, capacity,
    fanout, build, primitive, threads (strings bytewise)."""
    return (p.device.encode(), p.algorithm.encode(), p.network.encode(), p.batch, p.capacity,
            p.fanout, p.build.encode(), p.primitive.encode(), p.threads)


class PagingBase(DaemonCase):
    replayctl = REPLAYCTL

    def pages(self, call, req_type, page_size=0, limit=None, between=None, **kw):
        """Every page of a listing; between(reply) runs after each page that
        is not the last. Checks each reply's size against limit."""
        out, token = [], ""
        while True:
            r = call(req_type(page_size=page_size, page_token=token), timeout=20, **kw)
            if limit is not None:
                self.assertLessEqual(r.ByteSize(), limit)
            out.append(r)
            token = r.next_page_token
            if not token:
                return out
            self.assertLessEqual(len(out), 100000, "pages do not end")
            if between is not None:
                between(r)

    def workload_pages(self, **kw):
        return self.pages(self.d.stub.ListWorkloads, pb.ListWorkloadsRequest, **kw)

    def profile_pages(self, **kw):
        return self.pages(self.d.stub.ListProfiles, pb.ListProfilesRequest,
                          metadata=self.admin(), **kw)

    def ctl(self, *args, ok=True):
        return DaemonCase.ctl(self, *args, ok=ok, timeout=120)

    def import_profiles(self, lines, chunk=100):
        """ImportProfiles in requests that stay under a small message limit."""
        for i in range(0, len(lines), chunk):
            self.d.stub.ImportProfiles(pb.ImportProfilesRequest(
                jsonl="".join(lines[i:i + chunk]).encode()), metadata=self.admin(), timeout=20)


class TestWorkloadPages(PagingBase):
    """The issue's case: --max-message-bytes 64K, 40 long registrations."""
    extra = ("--max-message-bytes", "64K", "--max-workloads", "256")

    def setUp(self):
        super().setUp()
        self.ids = [self.d.stub.RegisterWorkload(long_spec(i), timeout=20).id for i in range(40)]

    def test_issue_case_pages_cover_every_workload_once(self):
        pages = self.workload_pages(limit=LIMIT_64K)
        self.assertGreater(len(pages), 1, "40 long workloads do not fit one 64K reply")
        got = [w.id for p in pages for w in p.workloads]
        self.assertEqual(got, sorted(self.ids))  # each once, in id order
        for p in pages:
            self.assertTrue(p.workloads)
            self.assertTrue(all(w.token == "" for w in p.workloads))
        # ServerInfo answers, within the limit, with the count and the first
        # workloads by id.
        info = self.d.stub.ServerInfo(pb.ServerInfoRequest(), timeout=20)
        self.assertLessEqual(info.ByteSize(), LIMIT_64K)
        self.assertEqual(info.workload_count, 40)
        self.assertTrue(info.workloads_truncated)
        self.assertFalse(info.devices_truncated)
        self.assertEqual(info.devices[0].kind, "cpu")
        listed = [w.id for w in info.workloads]
        self.assertTrue(0 < len(listed) < 40)
        self.assertEqual(listed, sorted(self.ids)[:len(listed)])
        # A client written before paging gets the first page.
        first = self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=20)
        self.assertEqual([w.id for w in first.workloads], got[:len(first.workloads)])

    def test_page_size_one_and_caps(self):
        pages = self.workload_pages(page_size=1, limit=LIMIT_64K)
        self.assertEqual(len(pages), 40)
        self.assertTrue(all(len(p.workloads) == 1 for p in pages))
        self.assertEqual([p.workloads[0].id for p in pages], sorted(self.ids))
        pages = self.workload_pages(page_size=7)
        self.assertEqual([len(p.workloads) for p in pages], [7] * 5 + [5])
        # Above the maximum: capped, then cut by size like the default page.
        huge = self.workload_pages(page_size=4000000000, limit=LIMIT_64K)
        default = self.workload_pages()
        self.assertEqual([len(p.workloads) for p in huge], [len(p.workloads) for p in default])
        self.assertEqual(default[-1].next_page_token, "")

    def test_small_listing_is_one_page(self):
        for i in self.ids[2:]:
            self.d.stub.DeleteWorkload(pb.WorkloadRef(id=i), metadata=self.admin(), timeout=20)
        r = self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=20)
        self.assertEqual(sorted(w.id for w in r.workloads), sorted(self.ids[:2]))
        self.assertEqual(r.next_page_token, "")
        info = self.d.stub.ServerInfo(pb.ServerInfoRequest(), timeout=20)
        self.assertEqual((info.workload_count, info.workloads_truncated, len(info.workloads)),
                         (2, False, 2))

    def test_invalid_tokens(self):
        good = self.workload_pages(page_size=3)[0].next_page_token
        self.assertTrue(good)
        self.import_profiles([profile_line(i) for i in range(3)])
        ptoken = self.profile_pages(page_size=1)[0].next_page_token
        self.assertTrue(ptoken)
        bad = ["x", good[:-1], good + "0", good.upper(), good.replace("w1.", "w2."), ptoken,
               "w1." + "g" * 32, " " + good, "w1." + "0" * 31 + "\u00e9", "w" * 3000]
        for t in bad:
            e = self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.d.stub.ListWorkloads,
                                 pb.ListWorkloadsRequest(page_token=t), timeout=20)
            self.assertIn("page_token", e.details())
        # Nothing changed, and the good token still works.
        self.assertTrue(self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(page_token=good),
                                                  timeout=20).workloads)
        self.assertEqual(sorted(w.id for p in self.workload_pages() for w in p.workloads),
                         sorted(self.ids))

    def test_cursor_workload_deleted_between_pages(self):
        """The page after a deleted cursor starts at the next id: neither the
        next workload skipped nor the deleted one repeated."""
        srt = sorted(self.ids)
        p1 = self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(page_size=3), timeout=20)
        self.assertEqual([w.id for w in p1.workloads], srt[:3])
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=srt[2]), metadata=self.admin(), timeout=20)
        p2 = self.d.stub.ListWorkloads(
            pb.ListWorkloadsRequest(page_size=3, page_token=p1.next_page_token), timeout=20)
        self.assertEqual([w.id for w in p2.workloads], srt[3:6])
        # Deleting the next one too: the page after starts after both.
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=srt[5]), metadata=self.admin(), timeout=20)
        self.d.stub.DeleteWorkload(pb.WorkloadRef(id=srt[6]), metadata=self.admin(), timeout=20)
        p3 = self.d.stub.ListWorkloads(
            pb.ListWorkloadsRequest(page_size=3, page_token=p2.next_page_token), timeout=20)
        self.assertEqual([w.id for w in p3.workloads], srt[7:10])

    def test_registrations_and_deletes_between_pages(self):
        rnd = random.Random(20)
        throughout = set(self.ids)  # registered before and never deleted
        new = set()                 # registered during the listing, still there
        ever = set(self.ids)        # every workload that existed at some point
        seen = []

        def churn(page):
            cursor = page.workloads[-1].id
            # Delete the cursor's workload at every other page, else a random one.
            victim = cursor if len(seen) % 2 else rnd.choice(sorted(throughout | new))
            self.d.stub.DeleteWorkload(pb.WorkloadRef(id=victim), metadata=self.admin(),
                                       timeout=20)
            throughout.discard(victim)
            new.discard(victim)
            for _ in range(2):
                new.add(self.d.stub.RegisterWorkload(long_spec(rnd.randrange(1000)),
                                                     timeout=20).id)
            ever.update(new)

        def record(page):
            seen.extend(w.id for w in page.workloads)
            churn(page)

        pages = self.workload_pages(page_size=4, limit=LIMIT_64K, between=record)
        seen.extend(w.id for w in pages[-1].workloads)
        self.assertEqual(len(seen), len(set(seen)), "a workload was listed twice")
        self.assertEqual(seen, sorted(seen), "pages out of id order")
        self.assertLessEqual(throughout, set(seen), "a workload registered throughout was skipped")
        self.assertLessEqual(set(seen), ever)

    def test_replayctl_across_pages(self):
        r = self.ctl("--json", "ls")
        ids = [w["id"] for w in json.loads(r.stdout)["workloads"]]
        self.assertEqual(ids, sorted(self.ids))
        text = self.ctl("ls").stdout
        self.assertEqual(sum(1 for i in self.ids if i in text), 40)
        self.assertEqual(json.loads(self.ctl("--json", "status").stdout)["workloads"], 40)
        self.assertRegex(self.ctl("status").stdout, r"workloads\s+40\b")


class TestTinyLimit(PagingBase):
    """At the smallest limit (4 KiB) a page may hold one workload, and
    ServerInfo still answers."""
    extra = ("--max-message-bytes", "4K")

    def test_one_workload_a_page(self):
        ids = [self.d.stub.RegisterWorkload(long_spec(i), timeout=20).id for i in range(6)]
        pages = self.workload_pages(limit=LIMIT_4K)
        self.assertEqual([len(p.workloads) for p in pages], [1] * 6)
        self.assertEqual([p.workloads[0].id for p in pages], sorted(ids))
        info = self.d.stub.ServerInfo(pb.ServerInfoRequest(), timeout=20)
        self.assertLessEqual(info.ByteSize(), LIMIT_4K)
        self.assertEqual((info.workload_count, info.workloads_truncated), (6, True))
        self.assertLessEqual(len(info.workloads), 1)
        # The other replies that grow stay within the limit or say why.
        for i in ids:
            self.assertLessEqual(
                self.d.stub.DescribeWorkload(pb.WorkloadRef(id=i), timeout=20).ByteSize(),
                LIMIT_4K)
        self.assertLessEqual(
            self.d.stub.ListDevices(pb.ListDevicesRequest(), timeout=20).ByteSize(), LIMIT_4K)
        self.assertEqual(len(json.loads(self.ctl("--json", "ls").stdout)["workloads"]), 6)

    def test_profile_pages_bounded_by_size(self):
        lines = [profile_line(i, build_len=120) for i in range(200)]
        self.import_profiles(lines, chunk=10)
        pages = self.profile_pages(limit=LIMIT_4K)
        self.assertGreater(len(pages), 10)
        got = [profile_key(p) for pg in pages for p in pg.profiles]
        self.assertEqual(len(got), 200)
        self.assertEqual(got, sorted(got))
        self.assertEqual(len(set(got)), 200)
        # ExportProfiles cannot page: past the limit it is refused, clearly.
        e = self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.d.stub.ExportProfiles,
                             pb.ExportProfilesRequest(), metadata=self.admin(), timeout=20)
        self.assertIn("message limit", e.details())
        r = self.ctl("--json", "profiles")
        self.assertEqual(len(json.loads(r.stdout)["profiles"]), 200)

    def test_insert_batch_keys_within_limit(self):
        """InsertBatch answers every key: a batch whose keys could not fit the
        reply is refused before anything is inserted."""
        w = self.d.stub.RegisterWorkload(pb.WorkloadSpec(
            name="u8", fields=[pb.Field(name="b", dtype=pb.UINT8)], capacity=100000), timeout=20)
        md = ((TOKEN_KEY, w.token),)
        e = self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.d.stub.InsertBatch,
                             pb.InsertRequest(workload_id=w.id,
                                              rows=pb.RowBatch(count=3000, columns=[bytes(3000)])),
                             metadata=md, timeout=20)
        self.assertIn("keys", e.details())
        self.assertEqual(self.d.stub.DescribeWorkload(pb.WorkloadRef(id=w.id),
                                                      timeout=20).counters.inserts, 0)
        r = self.d.stub.InsertBatch(pb.InsertRequest(
            workload_id=w.id, rows=pb.RowBatch(count=300, columns=[bytes(300)])),
            metadata=md, timeout=20)
        self.assertEqual(list(r.keys), list(range(300)))


class TestProfilePages(PagingBase):
    def test_pages_cover_every_profile_once(self):
        lines = [profile_line(i) for i in range(150)]
        self.import_profiles(lines)
        for size in (1, 7, 0, 10 ** 9):
            pages = self.profile_pages(page_size=size)
            got = [profile_key(p) for pg in pages for p in pg.profiles]
            self.assertEqual(len(got), 150, size)
            self.assertEqual(got, sorted(got), size)
            self.assertEqual(len(set(got)), 150, size)
            if size:
                self.assertTrue(all(len(pg.profiles) <= size for pg in pages))
        self.assertEqual(len(self.profile_pages(page_size=1)), 150)
        # The default page (1000) holds them all: one reply, no token.
        self.assertEqual(len(self.profile_pages()), 1)

    def test_default_page_and_replayctl_across_pages(self):
        """More profiles than the default page: several pages, and replayctl
        profiles shows every one."""
        lines = [profile_line(i, build_len=4) for i in range(2300)]
        self.import_profiles(lines, chunk=1000)
        pages = self.profile_pages()
        self.assertEqual([len(pg.profiles) for pg in pages], [1000, 1000, 300])
        r = self.ctl("--json", "profiles")
        keys = {(p["device"], p["primitive"], p["threads"], p["batch"], p["build"])
                for p in json.loads(r.stdout)["profiles"]}
        self.assertEqual(len(keys), 2300)

    def test_imports_between_pages(self):
        self.import_profiles([profile_line(i) for i in range(90)])
        before = {profile_key(p) for pg in self.profile_pages() for p in pg.profiles}
        seen = []
        counter = [1000]

        def churn(page):
            seen.extend(profile_key(p) for p in page.profiles)
            last = page.profiles[-1]
            # New keys before and after the cursor, and the cursor's own row
            # stored again (replaced: deleted and inserted).
            counter[0] += 1
            again = json.dumps({
                "device": last.device, "primitive": last.primitive, "threads": last.threads,
                "batch": last.batch, "capacity": last.capacity, "fanout": last.fanout,
                "algorithm": last.algorithm, "network": last.network, "build": last.build,
                "latency_s": 0.5, "reps": 1, "items": 0, "source": "measured",
                "measured_unix": 1}, separators=(",", ":")) + "\n"
            first = profile_line(0).replace("cpu-00000000000000aa", "cpu-0000000000000000")
            first = first.replace('"batch":1,', f'"batch":{counter[0]},')
            later = profile_line(0).replace("cpu-00000000000000aa", "zpu-ffffffffffffffff")
            later = later.replace('"batch":1,', f'"batch":{counter[0]},')
            self.d.stub.ImportProfiles(pb.ImportProfilesRequest(
                jsonl=(again + first + later).encode()), metadata=self.admin(), timeout=20)

        pages = self.profile_pages(page_size=6, between=churn)
        seen.extend(profile_key(p) for p in pages[-1].profiles)
        self.assertEqual(len(seen), len(set(seen)), "a profile was listed twice")
        self.assertEqual(seen, sorted(seen))
        self.assertLessEqual(before, set(seen), "a profile stored throughout was skipped")

    def test_cleared_between_pages(self):
        self.import_profiles([profile_line(i) for i in range(20)])
        p1 = self.d.stub.ListProfiles(pb.ListProfilesRequest(page_size=5), metadata=self.admin(),
                                      timeout=20)
        self.d.stub.ClearProfiles(pb.ClearProfilesRequest(), metadata=self.admin(), timeout=20)
        p2 = self.d.stub.ListProfiles(pb.ListProfilesRequest(page_token=p1.next_page_token),
                                      metadata=self.admin(), timeout=20)
        self.assertEqual((len(p2.profiles), p2.next_page_token), (0, ""))

    def test_invalid_tokens(self):
        self.import_profiles([profile_line(i) for i in range(10)])
        good = self.d.stub.ListProfiles(pb.ListProfilesRequest(page_size=2),
                                        metadata=self.admin(), timeout=20).next_page_token
        self.assertTrue(good.startswith("p1."))
        w = self.d.stub.RegisterWorkload(long_spec(1), timeout=20)
        self.d.stub.RegisterWorkload(long_spec(2), timeout=20)
        wtoken = self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(page_size=1),
                                           timeout=20).next_page_token
        self.assertTrue(wtoken)
        bad = ["x", good[:-1], good[:-2], good.upper().replace("P1.", "p1."), good + "00",
               "p1.zz", "p2." + good[3:], wtoken, "p1." + "ff" * 40, "p" * 3000]
        for t in bad:
            e = self.assert_code(grpc.StatusCode.INVALID_ARGUMENT, self.d.stub.ListProfiles,
                                 pb.ListProfilesRequest(page_token=t), metadata=self.admin(),
                                 timeout=20)
            self.assertIn("page_token", e.details())
        # The admin check comes first: a caller without the token learns nothing.
        self.assert_code(grpc.StatusCode.UNAUTHENTICATED, self.d.stub.ListProfiles,
                         pb.ListProfilesRequest(page_token="x"), timeout=20)
        self.assert_code(grpc.StatusCode.PERMISSION_DENIED, self.d.stub.ListProfiles,
                         pb.ListProfilesRequest(page_token="x"),
                         metadata=((TOKEN_KEY, w.token),), timeout=20)


if __name__ == "__main__":
    unittest.main(verbosity=2)
