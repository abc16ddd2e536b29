"""`pip install` of clients/python works offline in a venv over Debian's
packages, generates the message module from api/replayd.proto, and the
installed package talks to the daemon."""
import os
import shutil
import subprocess
import sys
import textwrap

from conftest import PKG_SRC, PROTO


def test_pip_install_in_a_venv(tmp_path, server):
    src = tmp_path / "src"
    # A copy of the package's source: pip builds in the tree it is given.
    shutil.copytree(PKG_SRC, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "_proto", "__pycache__", "tests", "examples"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(venv)], check=True)
    py = str(venv / "bin" / "python")
    env = dict(os.environ, REPLAYD_PROTO=PROTO, PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    code = textwrap.dedent(f"""
        import numpy as np, replayd
        assert "site-packages" in replayd.__file__, replayd.__file__
        c = replayd.Client("{server.address}")
        w = c.register(replayd.Spec(fields={{"x": (np.float32, 2)}}, capacity=10))
        w.insert({{"x": np.ones((3, 2), np.float32)}})
        print(len(w.sample(3)), w.describe().counters.inserts)
        w.delete()
    """)
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.split() == ["3", "3"]
