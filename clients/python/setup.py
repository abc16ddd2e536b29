"""Build hook: generate replayd/_proto/replayd_pb2.py from api/replayd.proto
(gen_proto.py; $REPLAYD_PROTO names another proto) before setuptools looks
at the packages, so an install always carries messages that match the proto
it was built next to. Metadata is in pyproject.toml.

Offline on Debian 12: python3 -m pip install --no-build-isolation clients/python
"""
import os
import sys

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_proto  # noqa: E402

proto = gen_proto.default_proto()
generated = os.path.join(HERE, "replayd", "_proto", "replayd_pb2.py")
if os.path.isfile(proto) or not os.path.isfile(generated):
    # No proto but a generated module: an sdist built earlier, which carries it.
    gen_proto.generate(proto, os.path.join(HERE, "replayd"))

setup()
