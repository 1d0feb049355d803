"""Room for the metrics' files of values (docs/operations.md, "Workers").

prometheus_client, with ``PROMETHEUS_MULTIPROC_DIR``, makes each file sparse and
writes it through a memory map: on a full filesystem the kernel kills the process
with SIGBUS at the first write it cannot back. Space reserved first
(``posix_fallocate``) turns that into an error. Kept apart from ``service.metrics``
so that the start-up check can use it before prometheus_client is imported.
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


class ValueFileFullError(OSError):
    """The metrics folder has no room left for a file of values, or for one to grow."""


def reserve(descriptor: int, size: int, filename: str) -> None:
    """Reserve the first ``size`` bytes of the open file (which grows to that size), or
    raise ``ValueFileFullError``.

    A filesystem that cannot reserve (musl, unlike glibc, does not write the blocks
    itself) gets the file grown sparse, as prometheus_client grows it.
    """
    try:
        os.posix_fallocate(descriptor, 0, size)
    except OSError as error:
        if error.errno in _CANNOT_RESERVE:
            if os.fstat(descriptor).st_size < size:
                os.ftruncate(descriptor, size)
            return
        raise ValueFileFullError(
            error.errno, f"no room for {size} bytes of metric values: {error.strerror}", filename
        ) from None
