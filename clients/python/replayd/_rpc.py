"""Calls on one channel: tokens, deadlines, retries, errors.

Every RPC of the Replay service gets a grpc multi-callable made once per
channel. The hot ones (Insert, InsertBatch, Sample, SampleStream,
UpdatePriorities) send and receive raw bytes that _wire.py builds and
reads; the rest use the generated message classes.

Deadlines: each call has one (the client's default `timeout`, or the
call's own), covering its retries. Retries: calls that change nothing, or
that give the same result when repeated, are retried on UNAVAILABLE (no
daemon answered: restarting, or not up yet) with exponential backoff until
`retries` are spent or the deadline would pass; calls whose repetition
could insert or train twice are never retried.
"""
import time
from typing import Any, Callable, Dict, Optional, Tuple

import grpc
from google.protobuf.message import DecodeError

from ._proto import replayd_pb2 as pb
from ._wire import WireError
from .errors import error_for, from_rpc_error

TOKEN_KEY = "x-replayd-token"
SERVICE = "/replayd.v1.Replay/"

# name: (request class or None for bytes, response class or None for bytes,
#        kind: uu unary, su client stream, ss bidirectional stream, retry-safe)
METHODS: Dict[str, Tuple[Any, Any, str, bool]] = {
    "RegisterWorkload": (pb.WorkloadSpec, pb.Workload, "uu", False),
    "DescribeWorkload": (pb.WorkloadRef, pb.Workload, "uu", True),
    "ListWorkloads": (pb.ListWorkloadsRequest, pb.ListWorkloadsResponse, "uu", True),
    "DeleteWorkload": (pb.WorkloadRef, pb.DeleteWorkloadResponse, "uu", False),
    "Insert": (None, None, "su", False),
    "InsertBatch": (None, None, "uu", False),
    "Sample": (None, None, "uu", True),
    "UpdatePriorities": (None, None, "uu", True),
    "TrainStep": (pb.TrainStepRequest, pb.TrainStepResponse, "uu", False),
    "GetWeights": (pb.GetWeightsRequest, pb.GetWeightsResponse, "uu", True),
    "ServerInfo": (pb.ServerInfoRequest, pb.ServerInfoResponse, "uu", True),
    "ListDevices": (pb.ListDevicesRequest, pb.ListDevicesResponse, "uu", True),
    "Plan": (pb.PlanRequest, pb.PlanResponse, "uu", False),
    "ListProfiles": (pb.ListProfilesRequest, pb.ListProfilesResponse, "uu", True),
    "ClearProfiles": (pb.ClearProfilesRequest, pb.ClearProfilesResponse, "uu", False),
    "ImportProfiles": (pb.ImportProfilesRequest, pb.ImportProfilesResponse, "uu", False),
    "ExportProfiles": (pb.ExportProfilesRequest, pb.ExportProfilesResponse, "uu", True),
    "SampleStream": (None, None, "ss", False),
}

RETRY_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})


def decoded(name: str, parse: Optional[Callable[[Any], Any]], reply: Any) -> Any:
    """parse(reply); a reply that cannot be read is Internal, naming the call."""
    if parse is None:
        return reply
    try:
        return parse(reply)
    except (WireError, DecodeError) as e:
        raise error_for(grpc.StatusCode.INTERNAL, f"the reply could not be decoded: {e}",
                        name) from e


class Calls:
    """The multi-callables of one channel, and how a call is made."""

    def __init__(self, channel: grpc.Channel, timeout: Optional[float], retries: int,
                 backoff: float):
        self.channel = channel
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.mc: Dict[str, Any] = {}
        for name, (req, rep, kind, _) in METHODS.items():
            ser = req.SerializeToString if req is not None else None
            de = rep.FromString if rep is not None else None
            make = {"uu": channel.unary_unary, "su": channel.stream_unary,
                    "ss": channel.stream_stream}[kind]
            self.mc[name] = make(SERVICE + name, request_serializer=ser, response_deserializer=de)

    @staticmethod
    def metadata(token: Optional[str]) -> Optional[Tuple[Tuple[str, str], ...]]:
        return ((TOKEN_KEY, token),) if token else None

    def deadline(self, timeout: Optional[float]) -> Optional[float]:
        t = self.timeout if timeout is None else timeout
        return None if t is None or t <= 0 else time.monotonic() + t

    def call(self, name: str, request: Any, token: Optional[str] = None,
             timeout: Optional[float] = None, parse: Optional[Callable[[Any], Any]] = None) -> Any:
        """One unary call: retried on UNAVAILABLE if the method is retry-safe,
        a replayd Error on failure, `parse`(reply) on success."""
        mc = self.mc[name]
        retry = METHODS[name][3]
        md = self.metadata(token)
        deadline = self.deadline(timeout)
        attempt = 0
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                reply = mc(request, metadata=md, timeout=left)
            except grpc.RpcError as e:
                code = e.code()
                if retry and code in RETRY_CODES and attempt < self.retries:
                    pause = self.backoff * (2 ** attempt)
                    if deadline is None or time.monotonic() + pause < deadline:
                        attempt += 1
                        time.sleep(pause)
                        continue
                raise from_rpc_error(e, name) from e
            return decoded(name, parse, reply)

    def future(self, name: str, request: Any, token: Optional[str],
               timeout: Optional[float]) -> Any:
        """A unary call started without waiting (a grpc.Future); no retries."""
        deadline = self.deadline(timeout)
        left = None if deadline is None else deadline - time.monotonic()
        return self.mc[name].future(request, metadata=self.metadata(token), timeout=left)
