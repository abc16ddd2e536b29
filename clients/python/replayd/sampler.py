"""Sampler: an iterator of sampled batches that keeps calls in flight.

A learner that samples, trains, then samples again waits one round trip per
batch. The sampler hides it: while the caller trains on batch i, the next
``prefetch`` batches are already being sampled. The batches in flight were
drawn before the caller's latest priority updates, exactly as the daemon's
own relaxed pipeline (papers/001 §V, relaxation depth D = prefetch) does.

Where the batches come from is a *source* with two methods, ``next()`` (the
next batch, raising the call's Error) and ``cancel()``:

- ``UnaryPrefetch`` (the one this daemon offers): ``prefetch`` unary Sample
  calls started as grpc futures, one started again as each is taken; no
  thread of its own;
- a server-streaming Sample, when the daemon's API has one, becomes one more
  source class selected in ``Sampler.__init__``; the iterator, its
  cancellation and its errors stay as they are.

``close()`` (or leaving a ``with`` block, or ``break`` followed by the
sampler being dropped) cancels the calls in flight; after it the iterator is
exhausted. An error ends the iteration: it is raised once from ``next()``
and the calls still in flight are cancelled.
"""
import collections
from typing import Any, Deque, Iterator, Optional

import grpc

from . import _wire
from ._rpc import decoded
from .errors import Error, error_for, from_rpc_error
from .types import Sample

__all__ = ["Sampler", "UnaryPrefetch"]


def sample_from_reply(raw: bytes, fields: Any) -> Sample:
    keys, probs, weights, table_size, _, cols = _wire.decode_sample(raw, fields)
    return Sample(keys=keys, probabilities=probs, weights=weights, table_size=table_size,
                  data=cols)


class UnaryPrefetch:
    """`depth` unary Sample calls in flight (grpc futures)."""

    def __init__(self, workload: Any, request: bytes, depth: int, timeout: Optional[float]):
        self._w = workload
        self._req = request
        self._timeout = timeout
        self._pending: Deque[Any] = collections.deque()
        for _ in range(depth):
            self._start()

    def _start(self) -> None:
        self._pending.append(self._w._calls.future("Sample", self._req, self._w.token,
                                                   self._timeout))

    def next(self) -> Sample:
        fut = self._pending.popleft()
        self._start()
        try:
            raw = fut.result()
        except grpc.RpcError as e:
            raise from_rpc_error(e, "Sample") from e
        except grpc.FutureCancelledError as e:
            raise error_for(grpc.StatusCode.CANCELLED, "the sample was cancelled", "Sample") from e
        fields = self._w.spec.fields
        return decoded("Sample", lambda r: sample_from_reply(r, fields), raw)

    def cancel(self) -> None:
        while self._pending:
            self._pending.popleft().cancel()

    @property
    def in_flight(self) -> int:
        return sum(1 for f in self._pending if not f.done())


class Sampler(Iterator[Sample]):
    """Iterate sampled batches of one workload; see the module docstring.

    ``max_batches`` ends the iteration after that many batches (None: until
    close())."""

    def __init__(self, workload: Any, batch_size: int, beta: Optional[float] = None,
                 stratified: bool = False, prefetch: int = 2, timeout: Optional[float] = None,
                 max_batches: Optional[int] = None):
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        self.batches = 0
        self._max = max_batches
        req = _wire.sample_request(workload.id_bytes, batch_size, beta, stratified)
        self._source: Any = UnaryPrefetch(workload, req, prefetch, timeout)
        self._closed = False

    def __iter__(self) -> "Sampler":
        return self

    def __next__(self) -> Sample:
        if self._closed or (self._max is not None and self.batches >= self._max):
            self.close()
            raise StopIteration
        try:
            s = self._source.next()
        except Error:
            self.close()
            raise
        self.batches += 1
        return s

    def close(self) -> None:
        """Cancel the calls in flight; the iterator is exhausted afterwards."""
        if not self._closed:
            self._closed = True
            self._source.cancel()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Sampler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
