#!/usr/bin/python3
"""TLS (issue 26, item 3), on the real replayd with certificates made here
by `openssl`: a plaintext client is refused, a client trusting another CA is
refused, one trusting the right CA works (Python's grpcio, replayctl
--tls-ca and the Python client's tls=CA_FILE); with --tls-client-ca, a client without a certificate or with one
another CA signed is refused and one with a certificate the client CA signed
works; bad TLS files stop the start with a message naming them.

usage: test_tls.py REPLAYD_EXE PROTO_DIR REPLAYCTL_EXE
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPLAYCTL = os.path.abspath(sys.argv.pop(3))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
# replayd_test generates the Python stubs and takes argv[1:3].
from replayd_test import Daemon, pb, TOKEN_KEY, grpc, pbg, cartpole_spec, rows, run_replayd  # noqa: E402

PKI = tempfile.mkdtemp(prefix="replayd-tls-")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python_client():
    """The replayd package of clients/python, imported from the source tree."""
    sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
    import gen_proto
    return gen_proto.import_from_source(os.path.join(ROOT, "api", "replayd.proto"))


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, cwd=PKI, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE)


def make_ca(name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
            "-subj", f"/CN=replayd test {name}")


def make_cert(name, ca, san):
    """A certificate for name signed by ca, with subjectAltName san."""
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
    with open(os.path.join(PKI, f"{name}.ext"), "w") as f:
        f.write(f"subjectAltName = {san}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")


def pem(name):
    with open(os.path.join(PKI, name), "rb") as f:
        return f.read()


def path(name):
    return os.path.join(PKI, name)


make_ca("ca")            # signs the server's certificate
make_ca("other")         # a CA nobody here trusts
make_ca("clientca")      # signs the clients' certificates
make_cert("server", "ca", "IP:127.0.0.1, DNS:localhost")
make_cert("client", "clientca", "DNS:client")
make_cert("stranger", "other", "DNS:stranger")


class TlsBase(unittest.TestCase):
    extra = ()

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-state-")
        self.d = Daemon(self.state, "--tls-cert", path("server.pem"), "--tls-key",
                        path("server.key"), *self.extra)
        self.target = f"127.0.0.1:{self.d.port}"
        self.channels = []

    def tearDown(self):
        for ch in self.channels:
            ch.close()
        self.assertEqual(self.d.stop(), 0)
        shutil.rmtree(self.state, ignore_errors=True)

    def stub(self, root=None, cert=None, key=None, plaintext=False):
        if plaintext:
            ch = grpc.insecure_channel(self.target)
        else:
            creds = grpc.ssl_channel_credentials(root_certificates=root, private_key=key,
                                                 certificate_chain=cert)
            ch = grpc.secure_channel(self.target, creds)
        self.channels.append(ch)
        return pbg.ReplayStub(ch)

    def refused(self, stub):
        with self.assertRaises(grpc.RpcError) as cm:
            stub.ServerInfo(pb.ServerInfoRequest(), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE,
                         cm.exception.details())

    def works(self, stub):
        info = stub.ServerInfo(pb.ServerInfoRequest(), timeout=10)
        self.assertTrue(info.version)
        w = stub.RegisterWorkload(cartpole_spec(), timeout=10)
        r = stub.InsertBatch(pb.InsertRequest(workload_id=w.id, rows=rows(20)),
                             metadata=((TOKEN_KEY, w.token),), timeout=10)
        self.assertEqual(r.inserted, 20)
        return w

    def replayctl(self, *args):
        return subprocess.run([REPLAYCTL, "--server", self.target, "--timeout", "5", *args],
                              capture_output=True, text=True, timeout=60)


class TestServerTls(TlsBase):
    def test_plaintext_client_refused(self):
        self.refused(self.stub(plaintext=True))
        self.assertIn(", TLS", self.d.log_after("listening on"))

    def test_wrong_ca_refused(self):
        self.refused(self.stub(root=pem("other.pem")))

    def test_right_ca_works(self):
        self.works(self.stub(root=pem("ca.pem")))

    def test_replayctl(self):
        ok = self.replayctl("--tls-ca", path("ca.pem"), "status")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("workloads", ok.stdout)
        wrong = self.replayctl("--tls-ca", path("other.pem"), "status")
        self.assertEqual(wrong.returncode, 1, wrong.stdout)
        self.assertIn("cannot connect", wrong.stderr)
        plain = self.replayctl("status")
        self.assertEqual(plain.returncode, 1, plain.stdout)
        missing = self.replayctl("--tls-ca", path("nope.pem"), "status")
        self.assertEqual(missing.returncode, 1)
        self.assertIn("nope.pem", missing.stderr)

    def test_python_client(self):
        replayd = python_client()
        with replayd.Client(self.target, tls=path("ca.pem"), timeout=10, retries=0) as c:
            self.assertTrue(c.server_info().version)
            self.assertTrue(c.devices())
        for tls in (path("other.pem"), False):  # wrong CA; plaintext
            with replayd.Client(self.target, tls=tls, timeout=5, retries=0) as c:
                with self.assertRaises(replayd.Unavailable):
                    c.server_info()


class TestClientCertificates(TlsBase):
    extra = ("--tls-client-ca", path("clientca.pem"))

    def test_no_client_certificate_refused(self):
        self.refused(self.stub(root=pem("ca.pem")))
        self.assertIn("client certificates required", self.d.log_after("listening on"))

    def test_certificate_of_another_ca_refused(self):
        self.refused(self.stub(root=pem("ca.pem"), cert=pem("stranger.pem"),
                               key=pem("stranger.key")))

    def test_client_certificate_works(self):
        w = self.works(self.stub(root=pem("ca.pem"), cert=pem("client.pem"),
                                 key=pem("client.key")))
        # The certificate lets a client in; the token still decides.
        stub = self.stub(root=pem("ca.pem"), cert=pem("client.pem"), key=pem("client.key"))
        with self.assertRaises(grpc.RpcError) as cm:
            stub.Sample(pb.SampleRequest(workload_id=w.id, batch_size=4),
                        metadata=((TOKEN_KEY, "0" * 64),), timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)

    def test_replayctl(self):
        ok = self.replayctl("--tls-ca", path("ca.pem"), "--tls-cert", path("client.pem"),
                            "--tls-key", path("client.key"), "ls")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        bare = self.replayctl("--tls-ca", path("ca.pem"), "ls")
        self.assertEqual(bare.returncode, 1, bare.stdout)
        usage = self.replayctl("--tls-ca", path("ca.pem"), "--tls-cert", path("client.pem"),
                               "ls")
        self.assertEqual(usage.returncode, 2)
        self.assertIn("--tls-cert and --tls-key go together", usage.stderr)


class TestBadFiles(unittest.TestCase):
    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="replayd-state-")

    def tearDown(self):
        shutil.rmtree(self.state, ignore_errors=True)

    def refuses(self, args, *texts):
        r = run_replayd(self.state, *args)
        self.assertEqual(r.returncode, 1, r.stderr)
        for t in texts:
            self.assertIn(t, r.stderr)

    def test_start_refusals(self):
        self.refuses(["--tls-cert", path("server.pem")], "tls-cert without tls-key")
        self.refuses(["--tls-key", path("server.key")], "tls-key without tls-cert")
        self.refuses(["--tls-client-ca", path("clientca.pem")], "tls-client-ca needs tls-cert")
        self.refuses(["--tls-cert", path("server.pem"), "--tls-key", path("client.key")],
                     "is not the private key of tls-cert")
        self.refuses(["--tls-cert", path("server.key"), "--tls-key", path("server.key")],
                     "no PEM certificate")
        self.refuses(["--tls-cert", path("server.pem"), "--tls-key", path("server.pem")],
                     "no PEM private key")
        self.refuses(["--tls-cert", path("absent.pem"), "--tls-key", path("server.key")],
                     "absent.pem", "No such file")
        self.refuses(["--tls-cert", path("server.pem"), "--tls-key", path("server.key"),
                      "--tls-client-ca", path("server.key")],
                     "tls-client-ca", "no PEM certificate")
        with open(path("nul.pem"), "wb") as f:
            f.write(pem("server.pem") + b"\0")
        with open(path("huge.pem"), "wb") as f:
            f.write(pem("server.pem") * (2 * 1024 * 1024 // len(pem("server.pem"))))
        self.refuses(["--tls-cert", path("nul.pem"), "--tls-key", path("server.key")],
                     "tls-cert", "holds a NUL byte")
        self.refuses(["--tls-cert", path("huge.pem"), "--tls-key", path("server.key")],
                     "tls-cert", "larger than 1048576 bytes")

    def test_replayctl_refuses_a_file_that_is_not_pem(self):
        with open(path("nul-ca.pem"), "wb") as f:
            f.write(pem("ca.pem") + b"\0")
        r = subprocess.run([REPLAYCTL, "--server", "127.0.0.1:1", "--tls-ca", path("nul-ca.pem"),
                            "status"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("nul-ca.pem: not a PEM file", r.stderr)


if __name__ == "__main__":
    try:
        unittest.main(verbosity=2)
    finally:
        shutil.rmtree(PKI, ignore_errors=True)
