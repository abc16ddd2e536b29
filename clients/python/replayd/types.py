"""Plain records for what the daemon returns (dataclasses, not protobuf).

Each record's fields are the proto message's fields of the same name
(api/replayd.proto); ``Placement`` is left as the protobuf message
(``replayd_pb2.Placement``: attribute access works the same way).
"""
from dataclasses import dataclass, fields
from typing import Any, Dict, Optional, Tuple, Type, TypeVar

import numpy as np

from .spec import Spec

__all__ = ["Counters", "LearnerCounters", "WorkloadInfo", "Device", "ServerInfo", "Sample",
           "UpdateResult", "TrainResult", "InsertResult", "Profile"]

T = TypeVar("T")


def record(cls: Type[T], msg: Any) -> T:
    """A dataclass of scalar fields filled from the message's same-named fields."""
    return cls(**{f.name: getattr(msg, f.name) for f in fields(cls)})  # type: ignore[call-arg]


@dataclass(frozen=True)
class Counters:
    """A workload's table counters."""
    inserts: int
    samples: int
    updates: int
    stale_updates: int
    size: int     # live items
    bytes: int    # memory held by rows and tree


@dataclass(frozen=True)
class LearnerCounters:
    """A hosted learner's state."""
    steps: int
    weight_version: int
    loss: float
    steps_per_second: float
    skipped_steps: int
    late_updates: int


@dataclass(frozen=True)
class WorkloadInfo:
    """DescribeWorkload / ListWorkloads: a workload without its token."""
    id: str
    spec: Spec
    counters: Counters
    created_unix: int
    learner: Optional[LearnerCounters]
    placement: Any  # replayd_pb2.Placement, or None without a learner
    rate_limiter: Any = None  # replayd_pb2.RateLimiterState, or None without a limiter

    @classmethod
    def from_proto(cls, m: Any) -> "WorkloadInfo":
        return cls(id=m.id, spec=Spec.from_proto(m.spec), counters=record(Counters, m.counters),
                   created_unix=m.created_unix,
                   learner=record(LearnerCounters, m.learner) if m.HasField("learner") else None,
                   placement=m.placement if m.HasField("placement") else None,
                   rate_limiter=m.rate_limiter if m.HasField("rate_limiter") else None)


@dataclass(frozen=True)
class Device:
    """One device of the daemon's machine (ListDevices)."""
    kind: str
    name: str
    fingerprint: str
    status: str
    capabilities: str
    model: str
    cores: int
    memory_bytes: int
    isa: str


@dataclass(frozen=True)
class ServerInfo:
    """ServerInfo: the first page of workloads and every device that fit."""
    version: str
    uptime_seconds: float
    devices: Tuple[Device, ...]
    workloads: Tuple[WorkloadInfo, ...]
    workload_count: int
    workloads_truncated: bool
    devices_truncated: bool

    @classmethod
    def from_proto(cls, m: Any) -> "ServerInfo":
        return cls(version=m.version, uptime_seconds=m.uptime_seconds,
                   devices=tuple(record(Device, d) for d in m.devices),
                   workloads=tuple(WorkloadInfo.from_proto(w) for w in m.workloads),
                   workload_count=m.workload_count, workloads_truncated=m.workloads_truncated,
                   devices_truncated=m.devices_truncated)


@dataclass(frozen=True)
class Sample:
    """One sampled batch. ``data`` maps each field to an array of shape
    (batch,) + field shape; the arrays are read-only views of the reply's
    bytes (copy one to write to it). ``weights`` are the importance-sampling
    weights (N P)^-beta divided by the batch's largest."""
    keys: np.ndarray           # uint64
    probabilities: np.ndarray  # float64, P(i) of each item
    weights: np.ndarray        # float64
    table_size: int
    data: Dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.keys.size)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]

    def to_torch(self, device: Any = None) -> Dict[str, Any]:
        """The columns and ``weights`` as torch tensors (copies, writable),
        on `device`; needs torch."""
        import torch  # not a dependency of the package: only this method needs it
        out = {k: torch.from_numpy(np.array(v)).to(device) for k, v in self.data.items()}
        out["weights"] = torch.from_numpy(self.weights.astype(np.float32)).to(device)
        return out


@dataclass(frozen=True)
class InsertResult:
    """InsertBatch: every new key. Insert stream (Writer.close): how many
    rows and the first key (keys is empty)."""
    keys: np.ndarray
    inserted: int
    first_key: int


@dataclass(frozen=True)
class UpdateResult:
    applied: int
    stale: int  # keys whose slot was overwritten since they were sampled: skipped


@dataclass(frozen=True)
class TrainResult:
    """TrainStep's summary of the steps it ran."""
    steps_done: int
    loss_mean: float
    td_abs_mean: float
    weight_version: int
    steps_per_second: float
    td_abs_max: float
    skipped_steps: int


@dataclass(frozen=True)
class Profile:
    """A stored profile: one primitive's latency on one device (admin)."""
    device: str
    primitive: str
    threads: int
    batch: int
    capacity: int
    fanout: int
    algorithm: str
    network: str
    build: str
    latency_s: float
    reps: int
    items: int
    source: str
    measured_unix: int

