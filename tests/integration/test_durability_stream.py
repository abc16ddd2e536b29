#!/usr/bin/python3
"""Streamed export and import (issue 22, item 4): ExportStream sends a
table larger than one message in chunks, ImportStream takes it back
bit-exact (rows, priorities, key counter); hostile import streams
(truncated, an oversize chunk, a wrong checksum, past the size limit,
cancelled) are clear errors that create nothing and leave no temporary
file; replayctl export/import go through the streams.

usage: test_durability_stream.py REPLAYD_EXE PROTO_DIR [REPLAYCTL_EXE]
"""
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

# test_durability takes REPLAYCTL_EXE off argv (and keeps it).
from test_durability import (REPLAYCTL, TOKEN_KEY, Base, Daemon, grpc, pb, parse_ckpt,
                             cartpole_spec, rows, xxh3)

CHUNK = 16 << 10


def export_stream(d, w, chunk=CHUNK, md=None):
    """The chunks of an ExportStream, checked for order, size and checksum."""
    out, total, digest = bytearray(), None, None
    n = 0
    for c in d.stub.ExportStream(pb.ExportStreamRequest(workload_id=w.id, chunk_bytes=chunk),
                                 metadata=md or ((TOKEN_KEY, w.token),), timeout=120):
        assert c.offset == len(out), (c.offset, len(out))
        assert len(c.data) <= chunk
        out += c.data
        total, digest = c.total_bytes, c.xxh3
        n += 1
    assert total == len(out), (total, len(out))
    assert digest == xxh3(bytes(out))
    return bytes(out), n


def chunks_of(data, name="", chunk=CHUNK, digest=None, end=True):
    msgs = [pb.ImportChunk(data=data[i:i + chunk]) for i in range(0, len(data), chunk)]
    if name:
        msgs[0].name = name
    if end:
        msgs.append(pb.ImportChunk(end=True, total_bytes=len(data),
                                   xxh3=xxh3(data) if digest is None else digest))
    return msgs


def table_of(data):
    """What must survive a move: the table's rows, leaves and counters."""
    ck = parse_ckpt(data)
    return {k: ck[k] for k in ("capacity", "next_key", "size", "leaves", "cols", "max_p",
                               "inserts", "fields")}


class StreamBase(Base):
    def tearDown(self):
        # A clean stop: an ASan build reports a stream's leak at exit.
        try:
            if self.d is not None and self.d.alive():
                rc = self.d.stop()
                self.assertEqual(rc, 0, "".join(self.d.lines[-30:]))
        finally:
            super().tearDown()

    def temp_files(self):
        """The daemon's temporary stream files: open (deleted) or on disk."""
        found = []
        fd_dir = "/proc/%d/fd" % self.d.proc.pid
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if "/.import-" in target or "/.export-" in target:
                found.append(target)
        ck = os.path.join(self.state, "checkpoints")
        found += [f for f in os.listdir(ck) if f.startswith((".import-", ".export-"))]
        return found

    def wait_no_temp_files(self, deadline_s=60):
        end = time.monotonic() + deadline_s
        while self.temp_files() and time.monotonic() < end:
            time.sleep(0.05)
        self.assertEqual(self.temp_files(), [])

    def count(self):
        return len(self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(), timeout=10).workloads)

    def filled(self, n=5000):
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=4000), timeout=10)
        for i in range(0, n, 1000):  # wraps: keys 0..999 are gone
            self.d.stub.InsertBatch(pb.InsertRequest(
                workload_id=w.id, rows=rows(1000, i),
                priorities=[0.5 + ((i + j) % 97) / 7.0 for j in range(1000)]),
                metadata=self.md(w), timeout=30)
        self.d.stub.UpdatePriorities(pb.UpdatePrioritiesRequest(
            workload_id=w.id, keys=[n - 700, n - 1], priorities=[9.25, 0.125]),
            metadata=self.md(w), timeout=10)
        return w


class TestStreamRoundTrip(StreamBase):
    def test_larger_than_a_message_round_trip(self):
        # 64 KiB messages: the unary export cannot carry this table.
        self.start("--max-message-bytes", "64K")
        w = self.filled()
        self.assert_code(grpc.StatusCode.RESOURCE_EXHAUSTED, self.export, w)
        data, n = export_stream(self.d, w)
        self.assertGreater(n, 4)
        before = table_of(data)
        self.assertEqual(before["size"], 4000)
        self.assertEqual(before["next_key"], 5000)
        other = tempfile.mkdtemp(prefix="replayd-stream-")
        try:
            d2 = Daemon(other, "--max-message-bytes", "64K")
            v = d2.stub.ImportStream(iter(chunks_of(data, name="moved")), timeout=120)
            self.assertEqual(v.spec.name, "moved")
            self.assertEqual(v.counters.size, 4000)
            back, _ = export_stream(d2, v)
            self.assertEqual(table_of(back), before)
            # Sampling draws the same keys and bytes on both servers.
            a = self.sample(w, 32)
            b = d2.stub.Sample(pb.SampleRequest(workload_id=v.id, batch_size=32, beta=0.5),
                               metadata=self.md(v), timeout=10)
            self.assertEqual(list(a.keys), list(b.keys))
            self.assertEqual(list(a.rows.columns), list(b.rows.columns))
            self.assertEqual(d2.stop(), 0)
        finally:
            shutil.rmtree(other, ignore_errors=True)
        self.wait_no_temp_files()

    def test_export_needs_the_token(self):
        self.start()
        w = self.filled(1000)
        e = self.assert_code(grpc.StatusCode.PERMISSION_DENIED, export_stream, self.d, w,
                             md=((TOKEN_KEY, "0" * 64),))
        self.assertTrue(e.details())
        data, _ = export_stream(self.d, w, md=self.admin_md())  # the admin may
        self.assertEqual(parse_ckpt(data)["size"], 1000)

    def test_export_cancelled_mid_stream(self):
        """A client that leaves an export: the server's temporary file and
        call go (a leaked call would hold up the clean stop)."""
        self.start()
        w = self.d.stub.RegisterWorkload(cartpole_spec(capacity=1000000), timeout=10)
        batch = rows(10000)  # 50 MB: more than gRPC and the sockets buffer
        for _ in range(100):
            self.d.stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=batch),
                                    metadata=self.md(w), timeout=30)
        it = self.d.stub.ExportStream(pb.ExportStreamRequest(workload_id=w.id, chunk_bytes=4096),
                                      metadata=self.md(w), timeout=120)
        first = next(it)
        self.assertGreater(first.total_bytes, 100 * 4096)
        it.cancel()
        self.wait_no_temp_files()
        # The server serves on.
        data, _ = export_stream(self.d, w, chunk=1 << 20)
        self.assertEqual(parse_ckpt(data)["size"], 1000000)

    @unittest.skipIf(REPLAYCTL is None, "no replayctl given")
    def test_replayctl_streams(self):
        self.start("--max-message-bytes", "64K")
        w = self.filled()
        base = [REPLAYCTL, "--server", "127.0.0.1:%d" % self.d.port]
        path = os.path.join(self.state, "export.rdc")
        out = subprocess.run(base + ["export", w.id, path, "--token", w.token],
                             capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        with open(path, "rb") as f:
            data = f.read()
        self.assertEqual(parse_ckpt(data)["next_key"], 5000)
        out = subprocess.run(base + ["import", path, "--name", "copy"], capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("\"copy\", 4000 items", out.stdout)
        ids = [x.id for x in self.d.stub.ListWorkloads(pb.ListWorkloadsRequest(),
                                                       timeout=10).workloads if x.id != w.id]
        self.assertEqual(len(ids), 1)
        v = self.d.stub.DescribeWorkload(pb.WorkloadRef(id=ids[0]), timeout=10)
        back, _ = export_stream(self.d, v, md=self.admin_md())
        self.assertEqual(table_of(back), table_of(data))


class TestHostileImport(StreamBase):
    def setUp(self):
        super().setUp()
        self.start("--import-max-bytes", "256K")
        w = self.filled(1000)
        self.data, _ = export_stream(self.d, w)
        self.assertGreater(len(self.data), 3 * CHUNK)
        self.assertLess(len(self.data), 256 << 10)
        self.n0 = self.count()

    def refused(self, code, msgs, word):
        e = self.assert_code(code, self.d.stub.ImportStream, iter(msgs), timeout=60)
        self.assertIn(word, e.details())
        self.assertEqual(self.count(), self.n0)
        self.wait_no_temp_files()
        return e

    def test_whole_stream_imports(self):  # the control: the same file goes in whole
        self.d.stub.ImportStream(iter(chunks_of(self.data)), timeout=60)
        self.assertEqual(self.count(), self.n0 + 1)
        self.wait_no_temp_files()

    def test_truncated(self):
        msgs = chunks_of(self.data, end=False)
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, msgs[:len(msgs) // 2], "truncated")

    def test_missing_chunk_with_end(self):
        msgs = chunks_of(self.data)
        del msgs[1]
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, msgs, "bytes")

    def test_oversize_chunk(self):
        big = pb.ImportChunk(data=b"\0" * ((4 << 20) + 1))
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, [big], "at most")

    def test_wrong_checksum(self):
        msgs = chunks_of(self.data, digest=xxh3(self.data) ^ 1)
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, msgs, "checksum")

    def test_flipped_byte_with_its_checksum(self):  # the file's own checks still apply
        bad = bytearray(self.data)
        bad[len(bad) // 2] ^= 1
        self.refused(grpc.StatusCode.INVALID_ARGUMENT, chunks_of(bytes(bad)), "import")

    def test_beyond_the_size_limit(self):
        msgs = [pb.ImportChunk(data=b"\1" * (64 << 10)) for _ in range(5)]
        self.refused(grpc.StatusCode.RESOURCE_EXHAUSTED, msgs, "import-max-bytes")

    def test_cancel_mid_stream(self):
        go_on = threading.Event()
        msgs = chunks_of(self.data)

        def gen():
            yield msgs[0]
            yield msgs[1]
            go_on.wait(60)

        call = self.d.stub.ImportStream.future(gen(), timeout=60)
        end = time.monotonic() + 60
        while not self.temp_files() and time.monotonic() < end:
            time.sleep(0.02)
        self.assertTrue(self.temp_files(), "the import's temporary file never opened")
        call.cancel()
        go_on.set()
        with self.assertRaises(grpc.FutureCancelledError):
            call.result()
        self.wait_no_temp_files()
        self.assertEqual(self.count(), self.n0)
        # The server serves the next import as usual.
        self.d.stub.ImportStream(iter(chunks_of(self.data)), timeout=60)
        self.assertEqual(self.count(), self.n0 + 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
