"""Workload specs: the row schema, the table's settings, the hosted learner.

A schema is an ordered mapping from field name to a type, written the way
numpy code already describes arrays::

    Spec(fields={"obs": (np.float32, (4,)),   # dtype and per-row shape
                 "action": np.int32,          # a scalar per row
                 "reward": "float32",         # dtype names work too
                 "next_obs": ("float32", 4),
                 "done": bool},               # Python types: bool, int -> int64, float -> float32
         capacity=100_000)

The wire dtypes are float32, int32, int64, uint8 and bool (one byte, 0 or
1). Options left as None take the daemon's defaults; the spec the daemon
returns (``Workload.spec``) has them filled in.
"""
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ._proto import replayd_pb2 as pb
from .errors import InvalidArgument

__all__ = ["Field", "Spec", "Learner", "DTYPES", "field_from"]

#: Wire dtype code -> numpy dtype (little-endian, as on the wire).
DTYPES: Dict[int, np.dtype] = {
    pb.FLOAT32: np.dtype("<f4"),
    pb.INT32: np.dtype("<i4"),
    pb.INT64: np.dtype("<i8"),
    pb.UINT8: np.dtype("u1"),
    pb.BOOL: np.dtype("?"),
}
_CODE_BY_DTYPE = {dt: code for code, dt in DTYPES.items()}
_PY_TYPES = {bool: np.dtype("?"), int: np.dtype("<i8"), float: np.dtype("<f4")}


def _as_dtype(t: Any, where: str) -> np.dtype:
    if isinstance(t, type) and t in _PY_TYPES:
        return _PY_TYPES[t]
    try:
        dt = np.dtype(t)
    except TypeError as e:
        raise InvalidArgument(f"{where}: {t!r} is not a dtype") from e
    dt = dt.newbyteorder("<") if dt.byteorder == ">" else dt
    if dt not in _CODE_BY_DTYPE:
        raise InvalidArgument(f"{where}: dtype {dt} is not one of float32, int32, int64, "
                              "uint8, bool")
    return DTYPES[_CODE_BY_DTYPE[dt]]


def _as_shape(s: Any, where: str) -> Tuple[int, ...]:
    if s is None:
        return ()
    if isinstance(s, (int, np.integer)):
        s = (s,)
    if isinstance(s, (str, bytes)):
        raise InvalidArgument(f"{where}: shape {s!r} is not a tuple of ints")
    try:
        shape = tuple(int(d) for d in s)
    except (TypeError, ValueError) as e:
        raise InvalidArgument(f"{where}: shape {s!r} is not a tuple of ints") from e
    if any(d < 1 for d in shape):
        raise InvalidArgument(f"{where}: shape {shape} has a dimension below 1")
    return shape


@dataclass(frozen=True)
class Field:
    """One column of the row schema: ``dtype`` per element, ``shape`` per row
    (``()`` for a scalar)."""

    name: str
    dtype: np.dtype
    shape: Tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", _as_dtype(self.dtype, f"field {self.name!r}"))
        object.__setattr__(self, "shape", _as_shape(self.shape, f"field {self.name!r}"))
        # Plain ints, computed once: every sampled batch uses them.
        object.__setattr__(self, "elements", math.prod(self.shape))
        object.__setattr__(self, "row_bytes", self.elements * self.dtype.itemsize)

    #: Elements per row (set at construction).
    elements: int = field(init=False, repr=False, compare=False)
    #: Bytes per row on the wire (set at construction).
    row_bytes: int = field(init=False, repr=False, compare=False)

    def to_proto(self) -> "pb.Field":
        return pb.Field(name=self.name, dtype=_CODE_BY_DTYPE[self.dtype], shape=list(self.shape))

    @classmethod
    def from_proto(cls, f: "pb.Field") -> "Field":
        if f.dtype not in DTYPES:
            raise InvalidArgument(f"field {f.name!r}: unknown wire dtype {f.dtype}")
        return cls(f.name, DTYPES[f.dtype], tuple(f.shape))


FieldType = Union[Field, type, str, np.dtype, Tuple[Any, Any]]


def field_from(name: str, t: FieldType) -> Field:
    """A Field from any of the spellings the module docstring lists: a
    Field, a dtype-like, ``(dtype, shape)``, or a numpy sub-array dtype such
    as ``np.dtype((np.float32, (4,)))``."""
    if isinstance(t, Field):
        if t.name != name:
            return Field(name, t.dtype, t.shape)
        return t
    if isinstance(t, tuple):
        if len(t) != 2:
            raise InvalidArgument(f"field {name!r}: give (dtype, shape), not {t!r}")
        return Field(name, t[0], t[1])
    if isinstance(t, np.dtype) and t.subdtype is not None:
        return Field(name, t.subdtype[0], t.subdtype[1])
    return Field(name, t, ())


_LEARNER_OPTIONALS = ("lr", "critic_lr", "gamma", "tau", "grad_clip", "huber_delta",
                      "double_dqn", "action_low", "action_high")


@dataclass
class Learner:
    """The hosted learner (LearnerSpec in api/replayd.proto): the daemon
    trains this network on the workload's rows (``Workload.train_step`` or,
    with ``samples_per_insert > 0``, continuously) and serves its weights
    (``Workload.get_weights``). Fields left None take the daemon's defaults.

    The learner reads the fields obs, action, reward, next_obs and discount
    (or done) of the row schema by name; see the proto for their meaning.
    """

    algorithm: str = "dqn"
    hidden: Sequence[int] = (64, 64)
    batch_size: int = 64
    num_actions: int = 0
    critic_hidden: Sequence[int] = ()
    activation: str = ""
    lr: Optional[float] = None
    critic_lr: Optional[float] = None
    gamma: Optional[float] = None
    target_update_period: int = 0
    tau: Optional[float] = None
    relaxation_depth: int = 0
    grad_clip: Optional[float] = None
    huber_delta: Optional[float] = None
    double_dqn: Optional[bool] = None
    action_low: Optional[float] = None
    action_high: Optional[float] = None
    samples_per_insert: float = 0.0
    min_size: int = 0

    def to_proto(self) -> "pb.LearnerSpec":
        m = pb.LearnerSpec(
            algorithm=self.algorithm, hidden=list(self.hidden), batch_size=self.batch_size,
            num_actions=self.num_actions, critic_hidden=list(self.critic_hidden),
            activation=self.activation, target_update_period=self.target_update_period,
            relaxation_depth=self.relaxation_depth,
            samples_per_insert=self.samples_per_insert, min_size=self.min_size)
        for name in _LEARNER_OPTIONALS:
            v = getattr(self, name)
            if v is not None:
                setattr(m, name, v)
        return m

    @classmethod
    def from_proto(cls, m: "pb.LearnerSpec") -> "Learner":
        kw: Dict[str, Any] = dict(
            algorithm=m.algorithm, hidden=tuple(m.hidden), batch_size=m.batch_size,
            num_actions=m.num_actions, critic_hidden=tuple(m.critic_hidden),
            activation=m.activation, target_update_period=m.target_update_period,
            relaxation_depth=m.relaxation_depth, samples_per_insert=m.samples_per_insert,
            min_size=m.min_size)
        for name in _LEARNER_OPTIONALS:
            kw[name] = getattr(m, name) if m.HasField(name) else None
        return cls(**kw)


_SPEC_OPTIONALS = ("alpha", "epsilon", "beta", "max_priority")


@dataclass
class Spec:
    """A workload: row schema (``fields``, in order), table capacity and
    prioritization settings, and optionally a hosted ``learner``.

    ``fields`` may be given as a mapping name -> type (see the module
    docstring) or as a sequence of :class:`Field`; it is stored as a tuple
    of Field.
    """

    fields: Any
    capacity: int
    name: str = ""
    fanout: int = 0
    alpha: Optional[float] = None
    epsilon: Optional[float] = None
    beta: Optional[float] = None
    seed: int = 0
    max_priority: Optional[float] = None
    max_batch: int = 0
    learner: Optional[Learner] = None
    # The table's rate limiter, RateLimiterSpec's fields by name
    # (min_size_to_sample, samples_per_insert, min_diff, max_diff,
    # error_buffer); None: none. Waiting calls wait in the daemon.
    rate_limiter: Optional[Mapping[str, float]] = None

    def __post_init__(self) -> None:
        f = self.fields
        if isinstance(f, Mapping):
            out = tuple(field_from(str(k), v) for k, v in f.items())
        elif isinstance(f, Iterable) and not isinstance(f, (str, bytes)):
            out = tuple(x if isinstance(x, Field) else field_from(*x) for x in f)
        else:
            raise InvalidArgument("fields: give a mapping name -> dtype/(dtype, shape)")
        if not out:
            raise InvalidArgument("fields: a schema needs at least one field")
        names = [x.name for x in out]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise InvalidArgument(f"fields: duplicate name(s) {sorted(dup)}")
        self.fields = out

    @property
    def field_names(self) -> Tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def row_bytes(self) -> int:
        """Bytes of one row over all fields."""
        return sum(f.row_bytes for f in self.fields)

    def to_proto(self) -> "pb.WorkloadSpec":
        m = pb.WorkloadSpec(
            name=self.name, fields=[f.to_proto() for f in self.fields],
            capacity=self.capacity, fanout=self.fanout, seed=self.seed,
            max_batch=self.max_batch)
        for name in _SPEC_OPTIONALS:
            v = getattr(self, name)
            if v is not None:
                setattr(m, name, float(v))
        if self.learner is not None:
            m.learner.CopyFrom(self.learner.to_proto())
        if self.rate_limiter is not None:
            try:
                m.rate_limiter.CopyFrom(pb.RateLimiterSpec(**self.rate_limiter))
            except (TypeError, ValueError) as e:
                raise InvalidArgument(f"rate_limiter: {e}") from e
        return m

    @classmethod
    def from_proto(cls, m: "pb.WorkloadSpec") -> "Spec":
        kw: Dict[str, Any] = dict(
            fields=[Field.from_proto(f) for f in m.fields], capacity=m.capacity,
            name=m.name, fanout=m.fanout, seed=m.seed, max_batch=m.max_batch)
        for name in _SPEC_OPTIONALS:
            kw[name] = getattr(m, name) if m.HasField(name) else None
        if m.HasField("learner"):
            kw["learner"] = Learner.from_proto(m.learner)
        if m.HasField("rate_limiter"):
            kw["rate_limiter"] = {f.name: v for f, v in m.rate_limiter.ListFields()}
        return cls(**kw)


def as_spec(spec: Union[Spec, "pb.WorkloadSpec", Mapping[str, Any]]) -> Spec:
    """A Spec from a Spec, a WorkloadSpec message, or keyword arguments in a dict."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, pb.WorkloadSpec):
        return Spec.from_proto(spec)
    if isinstance(spec, Mapping):
        return Spec(**spec)
    raise InvalidArgument(f"spec: expected a replayd.Spec, not {type(spec).__name__}")
