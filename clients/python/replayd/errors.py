"""Exceptions raised by the replayd client.

Every failed call raises a subclass of :class:`Error` that carries the gRPC
status code (``.code``, a ``grpc.StatusCode``) and the daemon's message
(``.message``), e.g. ``NotFound: NOT_FOUND: no workload 'ab12...'``. Input
the client can check before sending (a column of the wrong dtype or shape,
a missing field) raises :class:`InvalidArgument` at once, with code
INVALID_ARGUMENT, and nothing is sent; it is also a ``ValueError``.
"""
from typing import Dict, Optional, Type

import grpc

__all__ = [
    "Error", "InvalidArgument", "NotFound", "AlreadyExists", "PermissionDenied",
    "Unauthenticated", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
    "Unimplemented", "Internal", "Unavailable", "DeadlineExceeded", "Cancelled", "Unknown",
    "from_rpc_error",
]


class Error(Exception):
    """A replayd call failed: ``code`` is the gRPC status, ``message`` the
    daemon's (or the client's) explanation."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 method: Optional[str] = None):
        if code is not None:
            self.code = code
        self.message = message
        self.method = method
        where = f" ({method})" if method else ""
        super().__init__(f"{self.code.name}: {message}{where}")


class InvalidArgument(Error, ValueError):
    """INVALID_ARGUMENT: a bad request; nothing changed."""
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(Error, LookupError):
    """NOT_FOUND: no such workload (or key)."""
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(Error):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(Error):
    """PERMISSION_DENIED: a token was sent but it is not this workload's
    (nor, where accepted, the admin's)."""
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(Error):
    """UNAUTHENTICATED: the call needs a token and none was sent."""
    code = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhausted(Error):
    """RESOURCE_EXHAUSTED: a limit (memory, message size, a full queue)."""
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(Error):
    """FAILED_PRECONDITION: e.g. sampling an empty table, training before
    min_size rows."""
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(Error):
    """ABORTED: e.g. a second TrainStep on the same workload."""
    code = grpc.StatusCode.ABORTED


class OutOfRange(Error):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(Error):
    """UNIMPLEMENTED: the daemon does not have this RPC."""
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(Error):
    code = grpc.StatusCode.INTERNAL


class Unavailable(Error, ConnectionError):
    """UNAVAILABLE: no daemon answered (the client retried where it was
    safe to)."""
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(Error, TimeoutError):
    """DEADLINE_EXCEEDED: the call's deadline passed."""
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(Error):
    code = grpc.StatusCode.CANCELLED


class Unknown(Error):
    code = grpc.StatusCode.UNKNOWN


_BY_CODE: Dict[grpc.StatusCode, Type[Error]] = {
    c.code: c for c in (InvalidArgument, NotFound, AlreadyExists, PermissionDenied,
                        Unauthenticated, ResourceExhausted, FailedPrecondition, Aborted,
                        OutOfRange, Unimplemented, Internal, Unavailable, DeadlineExceeded,
                        Cancelled, Unknown)
}


def error_for(code: grpc.StatusCode, message: str, method: Optional[str] = None) -> Error:
    """The exception for a status code (Error itself for codes without a class)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return Error(message, code, method)
    return cls(message, method=method)


def from_rpc_error(e: grpc.RpcError, method: Optional[str] = None) -> Error:
    """A grpc.RpcError (a failed call) as the matching replayd exception."""
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    return error_for(code or grpc.StatusCode.UNKNOWN, details or str(e), method)
