"""Reading what a candidate could have made, from a process it cannot trust: yours, the judge,
another evaluation.

Anything a candidate can write may be a FIFO (an `open()` that waits for a writer forever), a
link to a file of yours (read with your rights), a directory in a file's place, or a sparse
terabyte. Every read of such a path goes through here: opened without following a final link
and without waiting (O_NOFOLLOW | O_NONBLOCK), checked to be a regular file on the open
descriptor (fstat, not the name, which can be swapped meanwhile), read to a bound.
"""
from __future__ import annotations

import os
import stat


class NotRegular(OSError):
    """The path is not a regular file of its own (a link, a FIFO, a socket, a folder...)."""


def open_regular(path: str | os.PathLike, dir_fd: int | None = None,
                 create: bool = False) -> int:
    """A descriptor for reading `path` (relative to `dir_fd` where given), which must be a
    regular file (made empty where it is missing and `create`). Raises NotRegular, or
    OSError where it cannot be opened (ELOOP: it is a link)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC |
                 (os.O_CREAT if create else 0), 0o644, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegular(f"{os.fspath(path)} is not a regular file")
    return fd


def read_regular(path: str | os.PathLike, limit: int, dir_fd: int | None = None) -> bytes:
    """At most `limit` bytes of a regular file (see open_regular)."""
    fd = open_regular(path, dir_fd)
    try:
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_folder(path: str | os.PathLike, dir_fd: int | None = None) -> int:
    """A descriptor of a directory, never through a final link (for walking a tree with
    `dir_fd`, so no component of a path is resolved twice)."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                   dir_fd=dir_fd)
