"""Messages between kforge's processes: length-prefixed JSON, never pickle.

The candidate's worker is the attacker's process. Whatever it writes to its end of the socket
is data the parent parses and checks, never code the parent runs (a pickle is a program: one
forged frame used to run the candidate's code in the notebook's own process). A frame is a
4-byte big-endian length and a UTF-8 JSON value, of bounded size, nesting and (from a worker)
number of values; anything else is a `ProtocolError`, which the parent turns into the
candidate's `runtime_error` ("protocol violation").
"""
from __future__ import annotations

import json
import os
import select
import socket
import struct

MAX_FRAME = 64 << 20     # a profile's events are the largest honest reply (a few MB)
# Honest frames nest 6 deep at most (a judge's reply, its report, an error map's rows). json's
# parser recurses: 5,000 `[` raise RecursionError, and a value nested 900 deep parses but
# breaks whatever recurses over it next (repr, a message, json.dumps of the verdict).
MAX_DEPTH = 32
# Values in one frame on a worker's connection: 64 MB of `{},` would be 21 million objects
# (~1.5 GB) in the parent. An honest reply holds a few thousand (2,000 profile events of 5 fields at most).
MAX_VALUES = 1 << 20


class ProtocolError(Exception):
    """A frame that is not what the protocol allows (too large, not JSON, wrong shape)."""


def encode(obj) -> bytes:
    data = json.dumps(obj, separators=(",", ":"), default=plain).encode()
    return struct.pack("!I", len(data)) + data


def plain(value):
    """What json cannot write natively: tuples are lists already; numbers from torch/NumPy."""
    for cast in (int, float):
        try:
            if cast(value) == value:
                return cast(value)
        except (TypeError, ValueError):
            pass
    return str(value)


def decode(data: bytes, max_values: int | None = None):
    """A frame's JSON value, checked to be within the bounds above before and after parsing."""
    containers = data.count(b"[") + data.count(b"{")     # C speed: a cheap upper bound
    if max_values is not None and containers + data.count(b",") > max_values:
        raise ProtocolError(f"a frame of more than {max_values} values")
    try:
        value = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ProtocolError(f"a frame nested deeper than {MAX_DEPTH} levels") from None
    except (UnicodeDecodeError, ValueError) as err:
        raise ProtocolError(f"a frame that is not JSON ({err})") from None
    if containers > MAX_DEPTH and nesting(value) > MAX_DEPTH:
        raise ProtocolError(f"a frame nested deeper than {MAX_DEPTH} levels")
    return value


def nesting(value) -> int:
    """How deep lists and objects nest in `value`, level by level without recursion (a hostile
    value must not exhaust the stack of whoever checks it); stops once past MAX_DEPTH."""
    depth, level = 0, [value]
    while depth <= MAX_DEPTH:
        containers = [v for v in level if isinstance(v, (list, dict))]
        if not containers:
            break
        depth += 1
        level = [c for v in containers for c in (v.values() if isinstance(v, dict) else v)]
    return depth


def send(sock: socket.socket, obj, fds=()) -> None:
    frame = encode(obj)
    if fds:
        socket.send_fds(sock, [frame], list(fds))
    else:
        sock.sendall(frame)


def recv_exactly(sock: socket.socket, size: int, chunk: bytes = b"") -> bytes:
    parts, have = [chunk], len(chunk)
    while have < size:
        more = sock.recv(min(size - have, 1 << 20))
        if not more:
            raise EOFError("the peer closed the connection mid-frame")
        parts.append(more)
        have += len(more)
    return b"".join(parts)


def recv(sock: socket.socket, with_fds: bool = False, max_values: int | None = None):
    """One frame's value (and descriptors sent with it); None at end of stream.

    Reads exactly one frame: two frames sent back to back arrive together, and the second
    must not be dropped. Without `with_fds`, descriptors a peer sends are never installed
    here (a plain recv() has no room for them: the kernel closes them)."""
    fds: list[int] = []
    if with_fds:
        chunk, fds, _, _ = socket.recv_fds(sock, 4, 8)
    else:
        chunk = sock.recv(4)
    if not chunk:
        return (None, []) if with_fds else None
    size = struct.unpack("!I", recv_exactly(sock, 4, chunk))[0]
    if size > MAX_FRAME:
        raise ProtocolError(f"a frame of {size} bytes (at most {MAX_FRAME} are allowed)")
    obj = decode(recv_exactly(sock, size), max_values)
    return (obj, fds) if with_fds else obj


class Channel:
    """One end of a worker's socket: send and receive JSON values (the parent's handle, and
    the worker's, which uses the same class)."""

    def __init__(self, fd_or_sock):
        self.sock = fd_or_sock if isinstance(fd_or_sock, socket.socket) else \
            socket.socket(fileno=fd_or_sock)

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, obj) -> None:
        send(self.sock, obj)

    def recv(self):
        value = recv(self.sock, max_values=MAX_VALUES)
        if value is None:
            raise EOFError("the worker closed its connection")
        return value

    def poll(self, timeout: float = 0.0) -> bool:
        try:
            readable, _, _ = select.select([self.sock], [], [], timeout)
        except (OSError, ValueError):
            return True      # closed: recv() says so
        return bool(readable)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def close_other_fds(keep: tuple[int, ...]) -> None:
    """Close every descriptor but `keep`: a worker holds only what it needs (its log on 1
    and 2, its connection), never one it inherited from the fork server."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        open_fds = list(range(3, 1024))
    for fd in open_fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
