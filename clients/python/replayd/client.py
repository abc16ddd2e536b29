"""Client (a connection to one daemon) and Workload (one workload's data calls).

Tokens (api/replayd.proto, "Authentication"): a workload's data calls carry
its token, which only RegisterWorkload returns; :class:`Workload` holds it.
The client's own ``token`` is the daemon's admin token (a file in its state
directory): the operator's calls need it (``plan``, the profile calls) and
``delete`` accepts it for any workload. Calls that need no token (describe,
list, server_info, devices) work without one.
"""
import os
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Union

import grpc
import numpy as np

from . import _wire
from ._proto import replayd_pb2 as pb
from ._rpc import Calls
from .columns import keys_of, pack, priorities_of
from .errors import InvalidArgument
from .sampler import Sampler, sample_from_reply
from .spec import Spec, as_spec
from .types import (Device, InsertResult, Profile, Sample, ServerInfo, TrainResult,
                    UpdateResult, WorkloadInfo, record)
from .weights import Weights, parse as parse_weights
from .writer import Writer

__all__ = ["Client", "Workload", "read_token", "DEFAULT_ADDRESS"]

DEFAULT_ADDRESS = "127.0.0.1:50051"
DEFAULT_MAX_MESSAGE = 256 << 20


def read_token(path: str) -> str:
    """A token kept in a file (the daemon's admin token file, or one saved
    from a registration), without its trailing newline."""
    with open(os.path.expanduser(path)) as f:
        return f.read().strip()


def _credentials(tls: Any) -> Optional[grpc.ChannelCredentials]:
    if tls is None or tls is False:
        return None
    if tls is True:
        return grpc.ssl_channel_credentials()
    if isinstance(tls, grpc.ChannelCredentials):
        return tls
    if isinstance(tls, (bytes, str)):
        pem = tls.encode() if isinstance(tls, str) else tls
        if not pem.lstrip().startswith(b"-----BEGIN"):
            with open(tls, "rb") as f:  # a path to a PEM file
                pem = f.read()
        return grpc.ssl_channel_credentials(root_certificates=pem)
    raise InvalidArgument("tls: give True, a grpc.ChannelCredentials, or root certificates "
                          "(PEM bytes or a path)")


class Client:
    """A connection to one replayd.

    ``address``: host:port (default $REPLAYD_SERVER, else 127.0.0.1:50051).
    ``token``: the admin token, for plan/profiles/delete-by-admin (default
    $REPLAYD_ADMIN_TOKEN). ``tls``: False (plain, e.g. loopback), True
    (system roots), root certificates (PEM bytes or a file path) or a
    grpc.ChannelCredentials. ``timeout``: the default deadline of every call
    in seconds (None: no deadline); each call also takes its own.
    ``retries``: how often a call that is safe to repeat is retried on
    UNAVAILABLE, waiting ``backoff`` * 2^attempt seconds in between.

    A Client is thread-safe and cheap to share; ``close()`` (or ``with``)
    closes the channel.
    """

    def __init__(self, address: Optional[str] = None, token: Optional[str] = None, *,
                 tls: Any = False, timeout: Optional[float] = 30.0, retries: int = 3,
                 backoff: float = 0.1, max_message_bytes: int = DEFAULT_MAX_MESSAGE,
                 options: Sequence[Any] = ()):
        self.address = address or os.environ.get("REPLAYD_SERVER") or DEFAULT_ADDRESS
        self.token = token if token is not None else os.environ.get("REPLAYD_ADMIN_TOKEN")
        opts = [("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes), *options]
        creds = _credentials(tls)
        if creds is None:
            self.channel = grpc.insecure_channel(self.address, options=opts)
        else:
            self.channel = grpc.secure_channel(self.address, creds, options=opts)
        self._calls = Calls(self.channel, timeout, retries, backoff)

    # -- connection ---------------------------------------------------------

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the channel is connected (Unavailable after timeout)."""
        from .errors import Unavailable
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError as e:
            raise Unavailable(f"no replayd answered at {self.address} within {timeout} s") from e

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the server ---------------------------------------------------------

    def server_info(self, timeout: Optional[float] = None) -> ServerInfo:
        """Version, uptime, devices and the first page of workloads."""
        return self._calls.call("ServerInfo", pb.ServerInfoRequest(), timeout=timeout,
                                parse=ServerInfo.from_proto)

    def devices(self, timeout: Optional[float] = None) -> List[Device]:
        """The daemon's devices (CPU, GPUs, FPGAs) and what runs on each."""
        return self._calls.call("ListDevices", pb.ListDevicesRequest(), timeout=timeout,
                                parse=lambda m: [record(Device, d) for d in m.devices])

    # -- workloads ----------------------------------------------------------

    def register(self, spec: Union[Spec, Mapping[str, Any], Any],
                 timeout: Optional[float] = None) -> "Workload":
        """Register a workload; the returned Workload holds its token (the
        only time the daemon gives it: keep it if other processes need it).
        Registration profiles and maps a learner workload, which can take
        seconds."""
        s = as_spec(spec)
        m = self._calls.call("RegisterWorkload", s.to_proto(), timeout=timeout)
        return Workload(self, m.id, m.token, Spec.from_proto(m.spec))

    def workload(self, id: str, token: Optional[str] = None) -> "Workload":
        """A handle on an existing workload (its token for data calls; the
        schema is read from the daemon at first use)."""
        return Workload(self, id, token, None)

    def describe(self, id: str, timeout: Optional[float] = None) -> WorkloadInfo:
        """A workload's spec, counters, learner state and placement."""
        return self._calls.call("DescribeWorkload", pb.WorkloadRef(id=id), timeout=timeout,
                                parse=WorkloadInfo.from_proto)

    def iter_workloads(self, page_size: int = 0,
                       timeout: Optional[float] = None) -> Iterator[WorkloadInfo]:
        """Every workload, by id, one page per call (page_size 0: the
        daemon's default page)."""
        token = ""
        while True:
            page = self._calls.call(
                "ListWorkloads", pb.ListWorkloadsRequest(page_size=page_size, page_token=token),
                timeout=timeout)
            for w in page.workloads:
                yield WorkloadInfo.from_proto(w)
            token = page.next_page_token
            if not token:
                return

    def list(self, page_size: int = 0, timeout: Optional[float] = None) -> List[WorkloadInfo]:
        """Every workload (all pages)."""
        return list(self.iter_workloads(page_size, timeout))

    def delete(self, id: str, token: Optional[str] = None,
               timeout: Optional[float] = None) -> None:
        """Delete a workload with its own token or, by default, the client's
        admin token."""
        self._calls.call("DeleteWorkload", pb.WorkloadRef(id=id),
                         token=token if token is not None else self.token, timeout=timeout)

    # -- operator calls (admin token) ---------------------------------------

    def plan(self, spec: Union[Spec, Mapping[str, Any], Any], gpu_profiles: bytes = b"",
             fpga_part: str = "", ignore_present: bool = False,
             timeout: Optional[float] = None) -> Any:
        """What the daemon would map a learner workload to, registering
        nothing (replayd_pb2.Placement). Measures and stores profiles: needs
        the admin token."""
        req = pb.PlanRequest(spec=as_spec(spec).to_proto(), gpu_profiles=gpu_profiles,
                             fpga_part=fpga_part, ignore_present=ignore_present)
        return self._calls.call("Plan", req, token=self.token, timeout=timeout,
                                parse=lambda m: m.placement)

    def iter_profiles(self, page_size: int = 0,
                      timeout: Optional[float] = None) -> Iterator[Profile]:
        """Every stored profile, one page per call (admin token)."""
        token = ""
        while True:
            page = self._calls.call(
                "ListProfiles", pb.ListProfilesRequest(page_size=page_size, page_token=token),
                token=self.token, timeout=timeout)
            for p in page.profiles:
                yield record(Profile, p)
            token = page.next_page_token
            if not token:
                return

    def profiles(self, page_size: int = 0, timeout: Optional[float] = None) -> List[Profile]:
        """Every stored profile (all pages; admin token)."""
        return list(self.iter_profiles(page_size, timeout))

    def export_profiles(self, timeout: Optional[float] = None) -> bytes:
        """The profile store as JSON lines (admin token)."""
        return self._calls.call("ExportProfiles", pb.ExportProfilesRequest(), token=self.token,
                                timeout=timeout, parse=lambda m: m.jsonl)

    def import_profiles(self, jsonl: bytes, timeout: Optional[float] = None) -> int:
        """Import JSON lines (all or nothing); returns how many (admin token)."""
        return self._calls.call("ImportProfiles", pb.ImportProfilesRequest(jsonl=jsonl),
                                token=self.token, timeout=timeout, parse=lambda m: m.imported)

    def clear_profiles(self, timeout: Optional[float] = None) -> int:
        """Remove every stored profile; returns how many (admin token)."""
        return self._calls.call("ClearProfiles", pb.ClearProfilesRequest(), token=self.token,
                                timeout=timeout, parse=lambda m: m.removed)


class Workload:
    """One workload's data calls, made with its token.

    Rows go in and come out as dicts of numpy arrays keyed by field name,
    with shape (rows,) + field shape and the field's dtype (Spec).
    """

    def __init__(self, client: Client, id: str, token: Optional[str], spec: Optional[Spec]):
        self.client = client
        self.id = id
        self.id_bytes = id.encode()
        self.token = token
        self._spec = spec
        self._calls = client._calls
        self._enc: Optional[_wire.InsertEncoder] = None

    def __repr__(self) -> str:
        return f"Workload(id={self.id!r})"

    @property
    def spec(self) -> Spec:
        """The normalised spec (defaults filled in), read once from the daemon."""
        if self._spec is None:
            self._spec = self.describe().spec
        return self._spec

    def describe(self, timeout: Optional[float] = None) -> WorkloadInfo:
        return self.client.describe(self.id, timeout)

    def _insert_request(self, batch: Mapping[str, Any], priorities: Any) -> bytes:
        n, cols = pack(self.spec.fields, batch)
        prio = priorities_of(priorities, n) if priorities is not None else None
        if self._enc is None:
            self._enc = _wire.InsertEncoder(self.id_bytes, self.spec.fields)
        return self._enc.encode(n, cols, prio)

    def delete(self, timeout: Optional[float] = None) -> None:
        """Delete the workload (its rows, its learner) with its own token."""
        self.client.delete(self.id, token=self.token or "", timeout=timeout)

    # -- rows in ------------------------------------------------------------

    def insert(self, batch: Mapping[str, Any], priorities: Any = None,
               timeout: Optional[float] = None) -> np.ndarray:
        """Insert a batch (dict of arrays, see replayd.columns) in one
        InsertBatch call; returns the new keys (uint64). ``priorities``: one
        raw priority (|TD error|) per row, or None for the largest seen."""
        req = self._insert_request(batch, priorities)
        return self._calls.call("InsertBatch", req, token=self.token, timeout=timeout,
                                parse=lambda raw: _wire.decode_insert(raw)[0])

    def insert_result(self, batch: Mapping[str, Any], priorities: Any = None,
                      timeout: Optional[float] = None) -> InsertResult:
        """insert(), returning the whole InsertResult."""
        req = self._insert_request(batch, priorities)
        return self._calls.call("InsertBatch", req, token=self.token, timeout=timeout,
                                parse=lambda raw: InsertResult(*_wire.decode_insert(raw)))

    def writer(self, max_rows: int = 256, max_seconds: Optional[float] = 1.0,
               queue_depth: int = 8, timeout: Optional[float] = None,
               max_message_rows: Optional[int] = None) -> Writer:
        """A Writer: rows appended one at a time (or in batches) go out in
        messages of max_rows on one Insert stream, coalesced up to
        max_message_rows while the stream falls behind (see replayd.writer)."""
        return Writer(self, max_rows=max_rows, max_seconds=max_seconds, queue_depth=queue_depth,
                      timeout=timeout, max_message_rows=max_message_rows)

    # -- rows out -----------------------------------------------------------

    def sample(self, batch_size: int, beta: Optional[float] = None, stratified: bool = False,
               timeout: Optional[float] = None) -> Sample:
        """One prioritized batch: keys, probabilities, IS weights (exponent
        beta, default the spec's) and the rows. ``stratified``: one draw per
        equal slice of the total priority."""
        req = _wire.sample_request(self.id_bytes, batch_size, beta, stratified,
                                  keys_fixed64=True)
        fields = self.spec.fields
        return self._calls.call("Sample", req, token=self.token, timeout=timeout,
                                parse=lambda raw: sample_from_reply(raw, fields))

    def sampler(self, batch_size: int, beta: Optional[float] = None, stratified: bool = False,
                prefetch: int = 2, timeout: Optional[float] = None,
                max_batches: Optional[int] = None, stream: bool = False) -> Sampler:
        """An iterator of batches with `prefetch` batches in flight (see
        replayd.sampler): unary Sample calls, or with ``stream=True`` one
        SampleStream whose window is `prefetch` (priority updates then go
        on the stream: Sampler.update). Close it (or use ``with``) to cancel
        what is in flight."""
        self.spec  # the schema before the first call, not inside it
        return Sampler(self, batch_size, beta, stratified, prefetch, timeout, max_batches,
                       stream)

    def update_priorities(self, keys: Any, priorities: Any,
                          timeout: Optional[float] = None) -> UpdateResult:
        """Set the priorities (raw |TD error|, transformed as at insert) of
        sampled keys; keys overwritten since are skipped and counted stale."""
        k = keys_of(keys)
        p = priorities_of(priorities, k.size)
        req = _wire.update_request(self.id_bytes, k, p)
        return self._calls.call("UpdatePriorities", req, token=self.token, timeout=timeout,
                                parse=lambda raw: UpdateResult(*_wire.decode_update(raw)))

    # -- the hosted learner -------------------------------------------------

    def train_step(self, steps: int = 1, timeout: Optional[float] = None) -> TrainResult:
        """Run `steps` gradient steps of the hosted learner (not in continuous
        mode). The deadline bounds it: DeadlineExceeded after stopping at a
        step boundary (the steps done stay done). Never retried."""
        return self._calls.call("TrainStep", pb.TrainStepRequest(workload_id=self.id, steps=steps),
                                token=self.token, timeout=timeout,
                                parse=lambda m: record(TrainResult, m))

    def get_weights(self, have_version: int = 0,
                    timeout: Optional[float] = None) -> Optional[Weights]:
        """The policy's weights if newer than have_version, else None (also
        None while the learner has published none: version 0)."""
        m = self._calls.call("GetWeights",
                             pb.GetWeightsRequest(workload_id=self.id, have_version=have_version),
                             token=self.token, timeout=timeout)
        if not m.weights:
            return None
        return parse_weights(m.weights, version=m.version)

    def get_weights_raw(self, have_version: int = 0,
                        timeout: Optional[float] = None) -> "tuple[int, bytes]":
        """(version, RDNN bytes) as the daemon sent them (bytes empty when not newer)."""
        m = self._calls.call("GetWeights",
                             pb.GetWeightsRequest(workload_id=self.id, have_version=have_version),
                             token=self.token, timeout=timeout)
        return int(m.version), bytes(m.weights)
