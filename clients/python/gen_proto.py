#!/usr/bin/python3
"""Generate replayd/_proto/replayd_pb2.py from api/replayd.proto.

The message classes are generated, never kept in git: setup.py runs this at
build time (so `pip install clients/python` always matches the proto it was
built next to), and the tests run it into a scratch copy of the package.

usage: gen_proto.py [PROTO] [PACKAGE_DIR]
    PROTO        default: $REPLAYD_PROTO, else ../../api/replayd.proto from here
    PACKAGE_DIR  the `replayd` package directory to write into (default: ./replayd)

Only the message module is generated: the client builds its calls with
grpc's generic multi-callables (replayd/_rpc.py), so no *_pb2_grpc module
(with its absolute `import replayd_pb2`) is needed.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def default_proto() -> str:
    """The proto this package is built from."""
    env = os.environ.get("REPLAYD_PROTO")
    if env:
        return os.path.abspath(env)
    return os.path.normpath(os.path.join(HERE, "..", "..", "api", "replayd.proto"))


def generate(proto: str, package_dir: str) -> str:
    """Write PACKAGE_DIR/_proto/{__init__,replayd_pb2}.py; returns the out dir.

    The proto is compiled under its own file name ("replayd.proto"), as any
    other generated client does, so this module and another program's
    replayd_pb2 describe the same file and can share one process.
    """
    if not os.path.isfile(proto):
        raise FileNotFoundError(
            f"replayd.proto not found at {proto}: build from the replayd source tree "
            "or set REPLAYD_PROTO")
    try:
        from grpc_tools import protoc
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise RuntimeError("grpc_tools is needed to build replayd "
                           "(Debian: python3-grpc-tools)") from e
    out = os.path.join(package_dir, "_proto")
    os.makedirs(out, exist_ok=True)
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    args = ["grpc_tools.protoc", "-I", os.path.dirname(proto), "-I", include, "--python_out",
            out, os.path.basename(proto)]
    rc = protoc.main(args)
    if rc != 0:
        raise RuntimeError(f"protoc failed ({rc}) on {proto}")
    with open(os.path.join(out, "__init__.py"), "w") as f:
        f.write('"""Generated from api/replayd.proto by gen_proto.py; not in git."""\n')
    return out


def import_from_source(proto: str = "") -> "object":
    """Import replayd from this source tree without installing it: the
    package is copied into a scratch directory (removed at exit) with its
    message module generated there, and that directory goes first on
    sys.path. For the examples and the benchmark; tests do the same."""
    import atexit
    import importlib
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="replayd-py-")
    atexit.register(shutil.rmtree, tmp, True)
    shutil.copytree(os.path.join(HERE, "replayd"), os.path.join(tmp, "replayd"),
                    ignore=shutil.ignore_patterns("_proto", "__pycache__"))
    generate(proto or default_proto(), os.path.join(tmp, "replayd"))
    sys.path.insert(0, tmp)
    return importlib.import_module("replayd")


if __name__ == "__main__":
    proto = sys.argv[1] if len(sys.argv) > 1 else default_proto()
    pkg = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "replayd")
    print(generate(proto, pkg))
