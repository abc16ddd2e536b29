#!/usr/bin/python3
"""Write the fuzz harnesses' seed corpus (tests/fuzz/corpus/<harness>/):
valid requests of every RPC, Insert streams, compressed bodies, config
files and command lines, profile lines, FPGA part files and stored specs.
Files are named seed-*; crash inputs a run finds are added next to them as
regress-* (kept, replayed by every run). Run it again after a proto change:
it rewrites the seeds and leaves regress-* alone.

usage: make_corpus.py   (with Debian's python3-grpc-tools)
"""
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")

gen = tempfile.mkdtemp(prefix="replayd-corpus-")
subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", os.path.join(ROOT, "api"),
                "--python_out", gen, os.path.join(ROOT, "api", "replayd.proto")], check=True)
sys.path.insert(0, gen)
import replayd_pb2 as pb  # noqa: E402

W1 = "W1" + "@" * 30  # fuzz_env.h's placeholders
W2 = "W2" + "@" * 30
# handlers.h's rd_method_t
(REGISTER, DESCRIBE, LIST, DELETE, INSERT, INSERT_BATCH, SAMPLE, UPDATE, TRAIN_STEP,
 GET_WEIGHTS, SERVER_INFO, LIST_DEVICES, PLAN, LIST_PROFILES, CLEAR_PROFILES, IMPORT_PROFILES,
 EXPORT_PROFILES) = range(17)
# fuzz_env.h's token flags
NONE, TOK_W1, TOK_W2, ADMIN, WRONG = range(5)


def write(harness, name, data):
    d = os.path.join(CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def fields():
    return [pb.Field(name="obs", dtype=pb.FLOAT32, shape=[4]),
            pb.Field(name="action", dtype=pb.INT32),
            pb.Field(name="reward", dtype=pb.FLOAT32),
            pb.Field(name="next_obs", dtype=pb.FLOAT32, shape=[4]),
            pb.Field(name="done", dtype=pb.BOOL)]


def rows(n):
    return pb.RowBatch(count=n, columns=[b"\0" * 16 * n, struct.pack(f"<{n}i", *([1] * n)),
                                         b"\0" * 4 * n, b"\0" * 16 * n, bytes(n)])


PROFILE = ('{"device":"gpu-0123456789abcdef","primitive":"train","threads":1,"batch":4,'
           '"capacity":256,"fanout":16,"algorithm":"dqn","network":"dqn:4-8-2",'
           '"build":"fuzz","latency_s":1.5e-05,"reps":7,"items":4,"source":"measured",'
           '"measured_unix":1700000000}\n')


def rpc(name, method, flags, msg):
    write("fuzz_rpc", name, bytes([method, flags]) + msg.SerializeToString())


def rpc_seeds():
    replay = pb.WorkloadSpec(name="seed", fields=fields(), capacity=128, seed=1)
    dqn = pb.WorkloadSpec(name="dqn", fields=fields(), capacity=128, seed=1,
                          learner=pb.LearnerSpec(algorithm="dqn", hidden=[8], batch_size=4,
                                                 num_actions=2, relaxation_depth=2))
    ddpg_fields = fields()
    ddpg_fields[1] = pb.Field(name="action", dtype=pb.FLOAT32, shape=[1])
    ddpg = pb.WorkloadSpec(name="ddpg", fields=ddpg_fields, capacity=128, seed=1,
                           learner=pb.LearnerSpec(algorithm="ddpg", hidden=[8], batch_size=4,
                                                  critic_hidden=[8], samples_per_insert=1.0))
    rpc("register-replay", REGISTER, NONE, replay)
    rpc("register-dqn", REGISTER, NONE, dqn)
    rpc("register-ddpg", REGISTER, NONE, ddpg)
    rpc("describe", DESCRIBE, NONE, pb.WorkloadRef(id=W2))
    rpc("list", LIST, NONE, pb.ListWorkloadsRequest(page_size=1))
    rpc("list-token", LIST, NONE, pb.ListWorkloadsRequest(page_size=1, page_token="w1." + W1))
    rpc("delete", DELETE, TOK_W1, pb.WorkloadRef(id=W1))
    rpc("delete-admin", DELETE, ADMIN, pb.WorkloadRef(id=W2))
    rpc("insert-batch", INSERT_BATCH, TOK_W1, pb.InsertRequest(workload_id=W1, rows=rows(8)))
    rpc("insert-batch-prio", INSERT_BATCH, TOK_W1,
        pb.InsertRequest(workload_id=W1, rows=rows(3), priorities=[0.5, 1.0, 2.0]))
    rpc("sample", SAMPLE, TOK_W1, pb.SampleRequest(workload_id=W1, batch_size=8, beta=0.4))
    rpc("sample-stratified", SAMPLE, TOK_W2,
        pb.SampleRequest(workload_id=W2, batch_size=16, stratified=True))
    rpc("update", UPDATE, TOK_W1,
        pb.UpdatePrioritiesRequest(workload_id=W1, keys=[0, 1, 63], priorities=[0.1, 2, 3]))
    rpc("train", TRAIN_STEP, TOK_W2, pb.TrainStepRequest(workload_id=W2, steps=2))
    rpc("weights", GET_WEIGHTS, TOK_W2, pb.GetWeightsRequest(workload_id=W2, have_version=0))
    rpc("server-info", SERVER_INFO, NONE, pb.ServerInfoRequest())
    rpc("devices", LIST_DEVICES, NONE, pb.ListDevicesRequest())
    rpc("plan", PLAN, ADMIN, pb.PlanRequest(spec=dqn, fpga_part="u250"))
    rpc("plan-gpu", PLAN, ADMIN, pb.PlanRequest(spec=dqn, gpu_profiles=PROFILE.encode()))
    rpc("list-profiles", LIST_PROFILES, ADMIN, pb.ListProfilesRequest(page_size=2))
    rpc("clear-profiles", CLEAR_PROFILES, ADMIN, pb.ClearProfilesRequest())
    rpc("import-profiles", IMPORT_PROFILES, ADMIN,
        pb.ImportProfilesRequest(jsonl=(PROFILE + PROFILE.replace("train", "sample")).encode()))
    rpc("export-profiles", EXPORT_PROFILES, ADMIN, pb.ExportProfilesRequest())


def stream_seeds():
    def stream(name, flags, msgs):
        data = bytes([flags])
        for m in msgs:
            b = m.SerializeToString()
            data += struct.pack("<H", len(b)) + b
        write("fuzz_insert_stream", name, data)
    stream("three", TOK_W1, [pb.InsertRequest(workload_id=W1, rows=rows(4)),
                             pb.InsertRequest(rows=rows(2)),
                             pb.InsertRequest(workload_id=W1, rows=rows(1), priorities=[1])])
    stream("learner", TOK_W2, [pb.InsertRequest(workload_id=W2, rows=rows(8))] * 2)
    stream("switch", TOK_W1, [pb.InsertRequest(workload_id=W1, rows=rows(1)),
                              pb.InsertRequest(workload_id=W2, rows=rows(1))])


def body_seeds():
    body = pb.InsertRequest(workload_id=W1, rows=rows(16)).SerializeToString()
    write("fuzz_rpc_body", "plain", bytes([0, 7]) + body)
    d = zlib.compressobj(9, zlib.DEFLATED, 15)
    write("fuzz_rpc_body", "deflate", bytes([1, 3]) + d.compress(body) + d.flush())
    g = zlib.compressobj(9, zlib.DEFLATED, 31)
    write("fuzz_rpc_body", "gzip", bytes([2, 40]) + g.compress(body) + g.flush())
    g = zlib.compressobj(9, zlib.DEFLATED, 31)
    write("fuzz_rpc_body", "gzip-bomb",
          bytes([2, 0]) + g.compress(b"\0" * (1 << 20)) + g.flush())


def config_seeds():
    write("fuzz_config", "file", b"\0" + b"""# replayd.conf
listen = 127.0.0.1:50051
threads = 4  # more
max_batch = 4096
max-memory = 2G
log-level = debug
fpga-xclbin-shape = 16,65536,1024,1000
metrics-listen = :9464
tls-cert =
""")
    args = ["--listen", "127.0.0.1:0", "--threads=3", "--max-message-bytes", "4M",
            "--metrics-listen=9464", "--log-level", "warn"]
    write("fuzz_config", "argv", b"\x01" + b"\0".join(a.encode() for a in args))
    write("fuzz_config", "help", b"\x01--help")


def profile_seeds():
    write("fuzz_profile_jsonl", "lines", (PROFILE + "\n" + PROFILE.replace(
        '"primitive":"train"', '"primitive":"sample"').replace("gpu-", "cpu-")).encode())


def part_seeds():
    parts = os.path.join(ROOT, "backends", "fpga", "parts")
    for f in sorted(os.listdir(parts)):
        if f.endswith(".part"):
            with open(os.path.join(parts, f)) as src:
                text = src.read().replace("name = " + f[:-5], "name = fuzz")
            write("fuzz_fpga_part", f[:-5], text.encode())


def stored_seeds():
    write("fuzz_stored_spec", "replay",
          pb.WorkloadSpec(name="s", fields=fields(), capacity=100, alpha=0.0).SerializeToString())
    write("fuzz_stored_spec", "dqn", pb.WorkloadSpec(
        name="d", fields=fields(), capacity=200,
        learner=pb.LearnerSpec(algorithm="dqn", hidden=[16, 16], batch_size=8,
                               num_actions=2)).SerializeToString())


rpc_seeds()
stream_seeds()
body_seeds()
config_seeds()
profile_seeds()
part_seeds()
stored_seeds()
print("seeds written under", CORPUS)
