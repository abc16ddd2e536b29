"""pytest set-up for the replayd Python client's tests.

The package under test is the source tree's clients/python/replayd, copied
into a scratch directory with its message module generated from
api/replayd.proto (gen_proto.py, as `pip install` does), so the tests need
no install and write nothing into the source tree.

Tests that talk to a daemon start the real replayd (the `Daemon` class of
tests/support/replayd_test.py) on a free loopback port. Its path comes
from $REPLAYD (tests/meson.build sets it) or --replayd; without one those
tests are skipped with a message saying so.
"""
import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_SRC = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PKG_SRC))
PROTO = os.path.join(ROOT, "api", "replayd.proto")

# The package, with generated stubs, in a scratch directory first on sys.path.
_pkg_tmp = tempfile.mkdtemp(prefix="replayd-pytest-pkg-")
shutil.copytree(os.path.join(PKG_SRC, "replayd"), os.path.join(_pkg_tmp, "replayd"),
                ignore=shutil.ignore_patterns("_proto", "__pycache__"))
sys.path.insert(0, PKG_SRC)
import gen_proto  # noqa: E402

gen_proto.generate(PROTO, os.path.join(_pkg_tmp, "replayd"))
sys.path.remove(PKG_SRC)
sys.path.insert(0, _pkg_tmp)


def pytest_addoption(parser):
    parser.addoption("--replayd", default=os.environ.get("REPLAYD"),
                     help="the replayd executable (default $REPLAYD)")


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_pkg_tmp, ignore_errors=True)


def _daemon_module(config):
    """tests/support/replayd_test.py (the daemon tests' shared support),
    imported with the argv it expects."""
    exe = config.getoption("--replayd")
    if not exe:
        pytest.skip("no replayd: set $REPLAYD or pass --replayd BUILD/daemon/replayd")
    if "replayd_test" in sys.modules:
        return sys.modules["replayd_test"]
    sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
    saved = sys.argv[:]
    sys.argv = [saved[0], exe, os.path.join(ROOT, "api")]
    try:
        import replayd_test  # generates its own stubs; takes argv[1:3]
    finally:
        sys.argv = saved
    return replayd_test


class Server:
    """A started daemon: its address, state directory and admin token."""

    def __init__(self, td, *extra):
        self.state = tempfile.mkdtemp(prefix="replayd-pytest-state-")
        self.d = td.Daemon(self.state, *extra)
        self.address = f"127.0.0.1:{self.d.port}"
        with open(os.path.join(self.state, "admin.token")) as f:
            self.admin_token = f.read().strip()

    def stop(self):
        rc = self.d.stop() if self.d.alive() else self.d.proc.returncode
        shutil.rmtree(self.state, ignore_errors=True)
        return rc


@pytest.fixture(scope="session")
def server(request):
    """One daemon for the tests that do not need their own."""
    s = Server(_daemon_module(request.config))
    yield s
    assert s.stop() == 0, "replayd did not exit 0 on SIGTERM"


@pytest.fixture
def fresh_server(request):
    """A daemon of the test's own (extra flags: the `daemon_args` marker)."""
    m = request.node.get_closest_marker("daemon_args")
    s = Server(_daemon_module(request.config), *(m.args if m else ()))
    yield s
    assert s.stop() == 0, "replayd did not exit 0 on SIGTERM"


@pytest.fixture
def client(server):
    import replayd
    c = replayd.Client(server.address, token=server.admin_token, timeout=30)
    yield c
    c.close()


def pytest_configure(config):
    config.addinivalue_line("markers", "daemon_args(*flags): flags for fresh_server's daemon")
