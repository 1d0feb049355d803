"""Room for the metrics' files of values (docs/operations.md, "Workers").

prometheus_client, with ``PROMETHEUS_MULTIPROC_DIR``, makes each file sparse and
writes it through a memory map: on a full filesystem the kernel kills the process
with SIGBUS at the first write it cannot back. Space reserved first
(``posix_fallocate``, or where Python has none, as on macOS, zeros written past the end
of the file) turns that into an error. Kept apart from ``service.metrics`` so that the
start-up check can use it before prometheus_client is imported.
"""

from __future__ import annotations

import errno
import os

#: prometheus_client's initial size of a file of values.
VALUE_FILE_BYTES = 1 << 16
#: The room each process takes in the folder at start: its counters' and its
#: histograms' files.
BYTES_PER_PROCESS = 2 * VALUE_FILE_BYTES
# What posix_fallocate fails with on a filesystem that cannot reserve space.
_CANNOT_RESERVE = frozenset({errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS})
# The zeros ``_write_zeros`` writes at a time.
_ZEROS = bytes(VALUE_FILE_BYTES)


class ValueFileFullError(OSError):
    """The metrics folder has no room left for a file of values, or for one to grow."""


def reserve(descriptor: int, size: int, filename: str) -> None:
    """Reserve the first ``size`` bytes of the open file (which grows to that size), or
    raise ``ValueFileFullError``.

    A filesystem that cannot reserve (musl, unlike glibc, does not write the blocks
    itself) gets the file grown sparse, as prometheus_client grows it. Where Python has
    no ``os.posix_fallocate`` (macOS) the zeros are written here (``_write_zeros``).
    """
    allocate = getattr(os, "posix_fallocate", _write_zeros)
    try:
        allocate(descriptor, 0, size)
    except OSError as error:
        if error.errno in _CANNOT_RESERVE:
            if os.fstat(descriptor).st_size < size:
                os.ftruncate(descriptor, size)
            return
        raise ValueFileFullError(
            error.errno, f"no room for {size} bytes of metric values: {error.strerror}", filename
        ) from None


def _write_zeros(descriptor: int, offset: int, length: int) -> None:
    """Reserve ``length`` bytes from ``offset`` as glibc's ``posix_fallocate`` does on a
    filesystem without fallocate, for a Python without it (macOS): write zeros where the
    file has none yet, past its end, so that the filesystem allocates those blocks now or
    fails (``ENOSPC``), and the file grows to ``offset + length``. What the file holds is
    left as it is. A failed write takes the file back to its size, freeing what it took."""
    end = offset + length
    start = position = max(offset, os.fstat(descriptor).st_size)
    zeros = memoryview(_ZEROS)
    try:
        while position < end:
            position += os.pwrite(descriptor, zeros[: end - position], position)
    except OSError:
        os.ftruncate(descriptor, start)
        raise
