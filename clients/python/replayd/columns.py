"""A batch of rows given as a dict of numpy arrays, checked against a schema.

``pack(fields, batch)`` returns the row count and one C-contiguous array per
field, in schema order, ready to be sent as the wire's packed columns
(each array's bytes are the column: np.ndarray's memory is little-endian
on the machines replayd runs on, and the dtypes are made explicit).

Rules (InvalidArgument naming the field otherwise; nothing is sent):
- every schema field is present, no other key;
- an array of field shape S for n rows has shape (n,) + S, the same n for all;
- dtypes must match the field, or cast to it safely (int32 -> int64,
  uint8 -> int32, ...: numpy's "safe" casting); float64 into a float32 field
  is refused rather than rounded silently (cast with .astype(np.float32));
  lists and scalars are converted to the field's dtype;
- a bool field takes bool arrays only; bytes other than 0 and 1 in one (a
  view of other data) are normalised to 0/1, as the daemon accepts no other;
- non-contiguous arrays (slices, transposes) are copied once.
"""
from typing import Any, List, Mapping, Sequence, Tuple

import numpy as np

from .errors import InvalidArgument
from .spec import Field

__all__ = ["pack"]

_BOOL = np.dtype("?")


def _column(f: Field, value: Any) -> np.ndarray:
    # The common case costs attribute reads only: no numpy call that could
    # release the GIL and queue this thread behind gRPC's (writer streams
    # are paced by those handoffs).
    if type(value) is np.ndarray and value.dtype == f.dtype and value.flags.c_contiguous:
        a = value
    elif isinstance(value, np.ndarray):
        a = value
        if a.dtype != f.dtype:
            if f.dtype == _BOOL or not np.can_cast(a.dtype, f.dtype, "safe"):
                raise InvalidArgument(
                    f"field {f.name!r} is {f.dtype.name}; got {a.dtype.name} (cast it with "
                    f".astype(np.{f.dtype.name if f.dtype != _BOOL else 'bool_'}))")
            a = a.astype(f.dtype)
        a = np.ascontiguousarray(a)
    else:
        try:
            a = np.ascontiguousarray(np.asarray(value, dtype=f.dtype))
        except (TypeError, ValueError) as e:
            raise InvalidArgument(f"field {f.name!r}: {e}") from e
    if f.dtype == _BOOL and a.size and a.tobytes().translate(None, b"\x00\x01"):
        a = a.view(np.uint8) != 0  # bytes other than 0/1: a view of other data
    return a


def pack(fields: Sequence[Field], batch: Mapping[str, Any]) -> Tuple[int, List[np.ndarray]]:
    """(n, columns) of a batch: see the module docstring for the rules."""
    if not isinstance(batch, Mapping):
        raise InvalidArgument(f"a batch is a dict of arrays, one per field; got "
                              f"{type(batch).__name__}")
    names = {f.name for f in fields}
    extra = [k for k in batch if k not in names]
    if extra:
        raise InvalidArgument(f"unknown field(s) {sorted(map(str, extra))}; the schema has "
                              f"{[f.name for f in fields]}")
    n = -1
    cols: List[np.ndarray] = []
    for f in fields:
        if f.name not in batch:
            raise InvalidArgument(f"field {f.name!r} is missing from the batch")
        a = _column(f, batch[f.name])
        if a.ndim != 1 + len(f.shape) or a.shape[1:] != f.shape:
            want = "(n, " + ", ".join(map(str, f.shape)) + ")" if f.shape else "(n,)"
            raise InvalidArgument(f"field {f.name!r} has shape {a.shape}; it needs {want}")
        if n < 0:
            n = a.shape[0]
        elif a.shape[0] != n:
            raise InvalidArgument(f"field {f.name!r} has {a.shape[0]} rows; "
                                  f"{fields[0].name!r} has {n}")
        cols.append(a)
    if n == 0:
        raise InvalidArgument("a batch needs at least one row")
    return n, cols


def priorities_of(p: Any, n: int) -> np.ndarray:
    """n raw priorities as float64 (InvalidArgument on a length mismatch)."""
    a = np.ascontiguousarray(np.asarray(p, dtype=np.float64).reshape(-1), dtype="<f8")
    if a.size != n:
        raise InvalidArgument(f"{a.size} priorities for {n} rows")
    return a


def keys_of(keys: Any) -> np.ndarray:
    """Sampled keys as uint64 (InvalidArgument for non-integers or negatives)."""
    k = np.asarray(keys)
    if k.dtype.kind not in "ui":
        raise InvalidArgument(f"keys must be integers, not {k.dtype}")
    if k.size and k.min() < 0:
        raise InvalidArgument("keys are non-negative")
    return k.reshape(-1).astype(np.uint64, copy=False)
