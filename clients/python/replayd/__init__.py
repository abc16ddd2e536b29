"""replayd: the Python client of the replayd replay-and-learner server.

    import numpy as np
    import replayd

    client = replayd.Client("127.0.0.1:50051")
    w = client.register(replayd.Spec(
        fields={"obs": (np.float32, (4,)), "action": np.int32, "reward": np.float32,
                "next_obs": (np.float32, (4,)), "done": bool},
        capacity=100_000))
    w.insert({"obs": obs, "action": act, "reward": rew, "next_obs": nxt, "done": done})
    with w.writer(max_rows=256) as wr:          # single transitions, one Insert stream
        wr.append({"obs": o, "action": 1, "reward": 1.0, "next_obs": o2, "done": False})
    s = w.sample(64, beta=0.4)                  # s.keys, s.weights, s.data["obs"], ...
    w.update_priorities(s.keys, np.abs(td))
    for s in w.sampler(64, prefetch=2):         # batches already in flight
        ...

Every call raises a replayd.Error subclass carrying the gRPC code and the
daemon's message. The wire contract is api/replayd.proto (package
replayd.v1); its message classes are ``replayd.pb`` (generated at build
time). Modules: client (Client, Workload), spec (Spec, Field, Learner),
columns (how a dict of arrays becomes columns), writer, sampler, weights
(the RDNN policy format, numpy forward, torch loading), types (the records
calls return), errors.
"""
from ._proto import replayd_pb2 as pb
from .client import DEFAULT_ADDRESS, Client, Workload, read_token
from .errors import (Aborted, AlreadyExists, Cancelled, DeadlineExceeded, Error,
                     FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                     PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable,
                     Unimplemented, Unknown)
from .sampler import Sampler
from .spec import Field, Learner, Spec
from .types import (Counters, Device, InsertResult, LearnerCounters, Profile, Sample,
                    ServerInfo, TrainResult, UpdateResult, WorkloadInfo)
from .weights import Weights, parse as parse_weights
from .writer import Writer

__version__ = "0.1.0"

__all__ = [
    "Client", "Workload", "read_token", "DEFAULT_ADDRESS", "pb",
    "Spec", "Field", "Learner",
    "Writer", "Sampler", "Weights", "parse_weights",
    "Sample", "InsertResult", "UpdateResult", "TrainResult", "WorkloadInfo", "Counters",
    "LearnerCounters", "ServerInfo", "Device", "Profile",
    "Error", "InvalidArgument", "NotFound", "AlreadyExists", "PermissionDenied",
    "Unauthenticated", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
    "Unimplemented", "Internal", "Unavailable", "DeadlineExceeded", "Cancelled", "Unknown",
]
