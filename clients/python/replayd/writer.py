"""Writer: single transitions batched into messages of the Insert stream.

An actor produces one transition at a time; the wire wants hundreds of rows
per message (one message per row would be bounded by gRPC's calls/s). The
writer copies each row into preallocated column buffers and sends them as
one InsertRequest on a client-streaming Insert call when

- ``max_rows`` rows are buffered (size) and the stream is keeping up, or
  ``max_message_rows`` rows are buffered while it is not (see below), or
- the oldest buffered row has waited ``max_seconds`` (time: a background
  thread flushes an idle actor's rows), or
- ``flush()`` or ``close()`` is called.

Rows of one message either all carry a priority or none do (the proto's
rule), so appending a row with a priority after rows without (or the other
way round) flushes the rows before it first.

Coalescing: gRPC's Python streams cost a fixed time per message (a thread
handoff per send), whatever its size, so a writer fed faster than the stream
sends would be capped at that many messages per second. While two or more
messages already wait to be sent, the writer keeps filling the current
message up to ``max_message_rows`` (default: up to 8 x max_rows, within the
workload's max_batch and 4 MiB) instead of cutting it at max_rows; as soon
as the stream catches up, messages are cut at max_rows again, and gRPC's
sending thread cuts a message of max_rows or more itself when it finds
nothing left to send. Rows keep their order either way. The stream is opened at the
first flush and kept; at most ``queue_depth`` messages wait to be sent, so a
slow daemon slows ``append`` down instead of growing memory. (A writer
that filled the queue resumes only once it has drained to a quarter: gRPC
sends each message from a thread of its own, and waking the writer for
every message sent would cost a thread switch per message.)

Errors: bad input raises at once (InvalidArgument) and buffers nothing. A
failed stream (the workload deleted, the daemon gone) raises its Error at
the next append/flush/close; the rows buffered or queued then are lost, and
the writer is closed. ``close()`` returns how many rows the daemon took.
"""
import collections
import threading
import time
from typing import Any, Dict, Iterator, Mapping, Optional

import grpc
import numpy as np

from . import _wire
from .columns import pack, priorities_of
from .errors import Error, InvalidArgument, error_for, from_rpc_error
from .types import InsertResult

__all__ = ["Writer"]

_END = object()
_MAX_MESSAGE_BYTES = 4 << 20


def _default_message_rows(spec: Any, max_rows: int) -> int:
    """Up to 8 x max_rows per coalesced message, within the workload's
    max_batch (the daemon refuses more) and 4 MiB."""
    cap = min(8 * max_rows, _MAX_MESSAGE_BYTES // max(1, spec.row_bytes))
    if spec.max_batch:
        cap = min(cap, spec.max_batch)
    return max(max_rows, cap)


class Writer:
    """Batches rows for one workload onto one Insert stream. Use as a context
    manager, or call close(): the background flush thread and the stream
    live until then. Thread-safe."""

    def __init__(self, workload: Any, max_rows: int = 256, max_seconds: Optional[float] = 1.0,
                 queue_depth: int = 8, timeout: Optional[float] = None,
                 max_message_rows: Optional[int] = None):
        if max_rows < 1:
            raise InvalidArgument("max_rows must be at least 1")
        if max_message_rows is not None and max_message_rows < max_rows:
            raise InvalidArgument("max_message_rows must be at least max_rows")
        if max_seconds is not None and max_seconds <= 0:
            raise InvalidArgument("max_seconds must be positive (or None: no time flush)")
        if queue_depth < 1:
            raise InvalidArgument("queue_depth must be at least 1")
        self._w = workload
        self._fields = workload.spec.fields
        self._enc = _wire.InsertEncoder(workload.id_bytes, self._fields)
        self.max_rows = max_rows
        if max_message_rows is None:
            max_message_rows = _default_message_rows(workload.spec, max_rows)
        self.max_message_rows = max_message_rows
        self.max_seconds = max_seconds
        self._timeout = timeout
        self._bufs: Dict[str, np.ndarray] = {
            f.name: np.zeros((max_message_rows,) + f.shape, dtype=f.dtype)
            for f in self._fields}
        self._prio = np.zeros(max_message_rows, dtype="<f8")
        self._n = 0
        self._with_prio = False
        self._oldest = 0.0
        self._cond = threading.Condition()
        self._msgs: "collections.deque[Any]" = collections.deque()  # messages to send
        self._mcond = threading.Condition()  # guards _msgs and the two flags below
        self._sender_waits = False  # gRPC's thread waits for a message
        self._writer_waits = False  # the writer waits for room
        self._call: Any = None
        self._queue_depth = queue_depth
        self._low_water = queue_depth // 4
        self._error: Optional[Error] = None
        self._closed = False
        self._result: Optional[InsertResult] = None
        self.rows_sent = 0       # rows handed to the stream
        self.messages_sent = 0
        self._ticker: Optional[threading.Thread] = None
        if max_seconds is not None:
            self._ticker = threading.Thread(target=self._tick, name="replayd-writer-flush",
                                            daemon=True)
            self._ticker.start()

    # -- public -------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Rows buffered, not yet sent."""
        return self._n

    def append(self, row: Mapping[str, Any], priority: Optional[float] = None) -> None:
        """Buffer one transition: a value per field (numpy arrays of the
        field's shape, or scalars for scalar fields), assigned as numpy
        assigns into an array of the field's dtype."""
        with self._cond:
            self._check_open()
            with_prio = priority is not None
            if self._n and with_prio != self._with_prio:
                self._flush_locked()
            i = self._n
            if len(row) != len(self._fields):
                self._row_keys_error(row)
            for f in self._fields:
                try:
                    v = row[f.name]
                except KeyError:
                    self._row_keys_error(row)
                if np.shape(v) != f.shape:
                    raise InvalidArgument(f"field {f.name!r}: a row needs shape {f.shape}, "
                                          f"got {np.shape(v)}")
                try:
                    self._bufs[f.name][i] = v
                except (TypeError, ValueError, OverflowError) as e:
                    raise InvalidArgument(f"field {f.name!r}: {e}") from e
            if with_prio:
                self._prio[i] = priority
            self._with_prio = with_prio
            self._n = i + 1
            if i == 0:
                self._oldest = time.monotonic()
                self._cond.notify_all()
            if self._n == self.max_message_rows or (self._n >= self.max_rows
                                                    and self._cut_now()):
                self._flush_locked()
            self._wake_sender()

    def extend(self, batch: Mapping[str, Any], priorities: Any = None) -> None:
        """Buffer a batch (a dict of arrays, the rules of replayd.columns.pack).
        A batch of max_rows or more rows with nothing buffered goes out as
        one message of its own (one smaller than max_message_rows only
        while the stream keeps up; otherwise it is coalesced)."""
        n, cols = pack(self._fields, batch)
        prio = priorities_of(priorities, n) if priorities is not None else None
        with self._cond:
            self._check_open()
            if self._n == 0 and n >= self.max_rows and (n >= self.max_message_rows
                                                        or self._cut_now()):
                self._send(self._enc.encode(n, cols, prio), n)
                return
            done = 0
            while done < n:
                if self._n and (prio is not None) != self._with_prio:
                    self._flush_locked()
                take = min(n - done, self.max_message_rows - self._n)
                for f, c in zip(self._fields, cols):
                    self._bufs[f.name][self._n:self._n + take] = c[done:done + take]
                if prio is not None:
                    self._prio[self._n:self._n + take] = prio[done:done + take]
                self._with_prio = prio is not None
                if self._n == 0:
                    self._oldest = time.monotonic()
                    self._cond.notify_all()
                self._n += take
                done += take
                if self._n == self.max_message_rows or (self._n >= self.max_rows
                                                        and self._cut_now()):
                    self._flush_locked()
            self._wake_sender()

    def flush(self) -> None:
        """Send the buffered rows now (one message)."""
        with self._cond:
            self._check_open()
            self._flush_locked()

    def close(self) -> InsertResult:
        """Flush, half-close the stream and wait for the daemon's reply:
        InsertResult(inserted=rows it took, first_key=its first key). A
        second close returns the same result."""
        with self._cond:
            if self._result is not None:
                return self._result
            self._check_open()
            self._flush_locked()
            self._closed = True
            self._cond.notify_all()
        if self._ticker is not None:
            self._ticker.join()
        if self._call is None:
            self._result = InsertResult(np.zeros(0, np.uint64), 0, 0)
            return self._result
        self._put(_END)
        try:
            raw = self._call.result()
        except grpc.RpcError as e:
            self._error = from_rpc_error(e, "Insert")
            raise self._error from e
        except grpc.FutureCancelledError as e:
            raise error_for(grpc.StatusCode.CANCELLED, "the Insert stream was cancelled",
                            "Insert") from e
        keys, inserted, first = _wire.decode_insert(raw)
        self._result = InsertResult(keys, inserted, first)
        return self._result

    def cancel(self) -> None:
        """Drop what is buffered and cancel the stream (rows already sent may
        or may not have been inserted)."""
        with self._cond:
            self._closed = True
            self._n = 0
            self._cond.notify_all()
            if self._error is None:
                self._error = error_for(grpc.StatusCode.CANCELLED, "the writer was cancelled",
                                        "Insert")
        if self._call is not None:
            self._call.cancel()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.cancel()

    # -- inside -------------------------------------------------------------

    def _row_keys_error(self, row: Mapping[str, Any]) -> None:
        names = [f.name for f in self._fields]
        missing = [n for n in names if n not in row]
        extra = [k for k in row if k not in names]
        raise InvalidArgument(f"a row needs exactly the fields {names}"
                              f"{'; missing ' + str(missing) if missing else ''}"
                              f"{'; unknown ' + str(extra) if extra else ''}")

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise error_for(grpc.StatusCode.FAILED_PRECONDITION, "the writer is closed", "Insert")
        if self._call is not None and self._call.done():
            self._fail_from_call()

    def _fail_from_call(self) -> None:
        try:
            self._call.result(timeout=0)
        except grpc.RpcError as e:
            self._error = from_rpc_error(e, "Insert")
        except Exception as e:  # noqa: BLE001 - cancelled, or the request iterator raised
            self._error = error_for(grpc.StatusCode.CANCELLED, f"the Insert stream ended: {e!r}",
                                    "Insert")
        else:
            self._error = error_for(grpc.StatusCode.ABORTED,
                                    "the daemon ended the Insert stream early", "Insert")
        self._closed = True
        raise self._error

    def _cut_now(self) -> bool:
        """Whether a message of max_rows or more should go now: the stream
        keeps up (fewer than two messages wait). Otherwise rows coalesce."""
        return len(self._msgs) < 2

    def _wake_sender(self) -> None:
        """max_rows or more rows coalesce here: a sending thread that waits
        on an empty queue must look at them (_requests cuts them). Called
        with the writer's lock held (the same order as _put's)."""
        if self._n >= self.max_rows:
            with self._mcond:
                if self._sender_waits:
                    self._mcond.notify_all()

    def _flush_locked(self) -> None:
        n = self._n
        if n == 0:
            return
        cols = [self._bufs[f.name][:n] for f in self._fields]
        prio = self._prio[:n] if self._with_prio else None
        data = self._enc.encode(n, cols, prio)
        self._n = 0
        self._send(data, n)

    def _requests(self) -> Iterator[bytes]:
        """The stream's messages, taken by gRPC's sending thread."""
        q, cond = self._msgs, self._mcond
        while True:
            if not q and self._n >= self.max_rows:
                self._cut_from_sender()
            with cond:
                while not q:
                    self._sender_waits = True
                    # Rows coalescing while the stream was behind: look again
                    # soon (the writer may have held its lock a moment ago).
                    cond.wait(0.002 if self._n >= self.max_rows else None)
                    self._sender_waits = False
                    if not q and self._n >= self.max_rows:
                        break
                if not q:
                    continue
                item = q.popleft()
                if self._writer_waits and len(q) <= self._low_water:
                    cond.notify_all()
            if item is _END:
                return
            yield item

    def _cut_from_sender(self) -> None:
        """gRPC's sending thread found nothing to send while the writer holds
        max_rows or more coalesced rows: cut them into a message now. It
        never blocks on the writer's lock (the writer may be waiting for
        this thread to make room), it only tries for a moment."""
        if not self._cond.acquire(timeout=0.001):
            return
        try:
            if self._error is None and not self._msgs and self._n >= self.max_rows:
                self._flush_locked()
        finally:
            self._cond.release()

    def _send(self, data: bytes, rows: int) -> None:
        if self._call is None:
            self._call = self._w._calls.mc["Insert"].future(
                self._requests(), metadata=self._w._calls.metadata(self._w.token),
                timeout=self._timeout)
        self._put(data)
        self.rows_sent += rows
        self.messages_sent += 1

    def _put(self, item: Any) -> None:
        q, cond = self._msgs, self._mcond
        with cond:
            while len(q) >= self._queue_depth:
                if self._call.done():
                    self._fail_from_call()
                self._writer_waits = True
                cond.wait(0.05)
                self._writer_waits = False
            q.append(item)
            if self._sender_waits:
                cond.notify_all()

    def _tick(self) -> None:
        assert self.max_seconds is not None
        with self._cond:
            while not self._closed:
                if self._n == 0:
                    self._cond.wait()
                    continue
                left = self._oldest + self.max_seconds - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                try:
                    if self._call is not None and self._call.done():
                        self._fail_from_call()
                    self._flush_locked()
                except Error as e:  # raised to the user at the next call
                    self._error = e
                    self._closed = True
