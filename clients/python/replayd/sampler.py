"""Sampler: an iterator of sampled batches that keeps calls in flight.

A learner that samples, trains, then samples again waits one round trip per
batch. The sampler hides it: while the caller trains on batch i, the next
``prefetch`` batches are already being sampled. The batches in flight were
drawn before the caller's latest priority updates, exactly as the daemon's
own relaxed pipeline (papers/001 §V, relaxation depth D = prefetch) does.

Where the batches come from is a *source* with three methods, ``next()``
(the next batch, raising the call's Error), ``update(keys, priorities)``
and ``cancel()``:

- ``UnaryPrefetch`` (the default): ``prefetch`` unary Sample calls started
  as grpc futures, one started again as each is taken; no thread of its
  own; updates are UpdatePriorities calls;
- ``StreamSource`` (``stream=True``): one bidirectional SampleStream whose
  window is ``prefetch``: the daemon samples that many batches ahead (each
  through the table's rate limiter: a held-back batch waits in the daemon,
  not in a failed call) and sends each as soon as it is drawn; taking a
  batch acknowledges it on the stream, and priority updates travel on the
  same stream (applied in order). ``timeout`` is then the stream's
  deadline (None: none, whatever the client's default), not each batch's.

``close()`` (or leaving a ``with`` block, or ``break`` followed by the
sampler being dropped) cancels the calls in flight (a stream is half-closed
first, so the updates given reach the daemon); after it the iterator is
exhausted. An error ends the iteration: it is raised once from ``next()``
and the calls still in flight are cancelled.
"""
import collections
import queue
import threading
from typing import Any, Deque, Iterator, Optional

import grpc

from . import _wire
from ._rpc import decoded
from .columns import keys_of, priorities_of
from .errors import Error, error_for, from_rpc_error
from .types import Sample, UpdateResult

__all__ = ["Sampler", "StreamSource", "UnaryPrefetch"]

MAX_WINDOW = 64  # SampleStream's window: 1..64
CLOSE_WAIT = 5.0  # seconds a closing stream waits for the daemon's end


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

    def update(self, keys: Any, priorities: Any) -> Optional[UpdateResult]:
        return self._w.update_priorities(keys, priorities, self._timeout)

    def cancel(self) -> None:
        while self._pending:
            self._pending.popleft().cancel()

    @property
    def in_flight(self) -> int:
        return sum(1 for f in self._pending if not f.done())


class StreamSource:
    """One SampleStream call with a window of batches.

    Taken batches are owed to the daemon, which samples no further ahead
    than the window; they are acknowledged every window / 4 batches (or
    with the next update), as the C client's sampler does. The requests go
    out through grpcio's request-iterator thread, fed from a queue."""

    def __init__(self, workload: Any, first: bytes, window: int, timeout: Optional[float]):
        self._w = workload
        self._q: "queue.SimpleQueue[Optional[bytes]]" = queue.SimpleQueue()
        self._q.put(first)
        self._ack_every = max(1, window // 4)
        self._owed = 0
        self._ended = False
        # The stream's deadline is the sampler's own timeout only: the
        # client's default, meant for one call, would end a learner's stream.
        calls = workload._calls
        self._call = calls.mc["SampleStream"](
            self._requests(), metadata=calls.metadata(workload.token),
            timeout=timeout if timeout is not None and timeout > 0 else None)

    def _requests(self) -> Iterator[bytes]:
        while True:
            m = self._q.get()
            if m is None:
                return
            yield m

    def _send(self, keys: Any = None, priorities: Any = None) -> None:
        self._q.put(_wire.sample_stream_more(self._owed, keys, priorities))
        self._owed = 0

    def next(self) -> Sample:
        try:
            raw = next(self._call)
        except grpc.RpcError as e:
            self._end()
            raise from_rpc_error(e, "SampleStream") from e
        except StopIteration as e:
            self._end()
            raise error_for(grpc.StatusCode.UNKNOWN, "the server ended the stream before it "
                            "was closed", "SampleStream") from e
        self._owed += 1
        if self._owed >= self._ack_every:
            self._send()
        fields = self._w.spec.fields
        return decoded("SampleStream", lambda r: sample_from_reply(r, fields), raw)

    def update(self, keys: Any, priorities: Any) -> Optional[UpdateResult]:
        """Queued on the stream (with the acknowledgements owed); an invalid
        one ends the stream with InvalidArgument at a later next()."""
        k = keys_of(keys)
        p = priorities_of(priorities, k.size)
        if not self._ended:
            self._send(k, p)
        return None

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self._q.put(None)

    def cancel(self) -> None:
        """Half-close, so that the updates already given reach the daemon,
        drop the batches still in flight, and cancel the call if the daemon
        has not ended it within CLOSE_WAIT seconds."""
        if self._call.done():
            self._end()
            return
        self._end()
        timer = threading.Timer(CLOSE_WAIT, self._call.cancel)
        timer.daemon = True
        timer.start()
        try:
            for _ in self._call:
                pass
        except grpc.RpcError:
            pass
        finally:
            timer.cancel()

    @property
    def in_flight(self) -> int:
        return 0 if self._ended or self._call.done() else 1


class Sampler(Iterator[Sample]):
    """Iterate sampled batches of one workload; see the module docstring.

    ``max_batches`` ends the iteration after that many batches (None: until
    close())."""

    def __init__(self, workload: Any, batch_size: int, beta: Optional[float] = None,
                 stratified: bool = False, prefetch: int = 2, timeout: Optional[float] = None,
                 max_batches: Optional[int] = None, stream: bool = False):
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        if stream and prefetch > MAX_WINDOW:
            raise ValueError(f"a stream's window (prefetch) is at most {MAX_WINDOW}")
        self.batches = 0
        self._max = max_batches
        if stream:
            req = _wire.sample_stream_open(workload.id_bytes, batch_size, beta, stratified,
                                           prefetch, keys_fixed64=True)
            self._source: Any = StreamSource(workload, req, prefetch, timeout)
        else:
            req = _wire.sample_request(workload.id_bytes, batch_size, beta, stratified,
                                      keys_fixed64=True)
            self._source = UnaryPrefetch(workload, req, prefetch, timeout)
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

    def update(self, keys: Any, priorities: Any) -> Optional[UpdateResult]:
        """New priorities (raw |TD error|) for sampled keys: an
        UpdatePriorities call (its result), or on a stream a message on it
        (None; applied in order, before the batches it lets through)."""
        return self._source.update(keys, priorities)

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
