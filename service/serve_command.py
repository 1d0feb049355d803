"""``cardrules serve``, ``cardrules keygen`` and ``cardrules keyid`` (design section 6).

The server module is imported only after the configuration is known: with
several workers, prometheus multiprocess mode must be switched on (by
``PROMETHEUS_MULTIPROC_DIR``) before ``prometheus_client`` is first imported.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from service.config import (
    DEPRECATED_MULTIPROC_ENV,
    MULTIPROC_ENV,
    MULTIPROC_VALUE_FILE,
    ConfigValueError,
    StartStoppedError,
    add_server_arguments,
    env_name,
    given_by,
    hide_keys,
    resolve,
    unknown_variables,
    variable_slips,
)
from service.start_signals import pending_signals
from service.value_space import BYTES_PER_PROCESS, reserve

if TYPE_CHECKING:
    from service.tokens import KeyRing


def add_commands(subparsers: argparse._SubParsersAction[Any]) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="run the gRPC and HTTP/JSON service",
        description="Run the cardrules service: gRPC, the HTTP/JSON gateway and metrics. Every flag can also be set with the "
        "CARDRULES_* environment variable shown in brackets.",
    )
    add_server_arguments(serve)
    serve.set_defaults(handler=run_serve)
    keygen = subparsers.add_parser(
        "keygen",
        help="print a new random state key (base64) for CARDRULES_STATE_KEYS",
        description="Print a new random state key (base64) for CARDRULES_STATE_KEYS, drawn "
        "from the operating system's random source: 32 bytes for AES-256 "
        "(docs/operations.md, Key rotation).",
    )
    keygen.set_defaults(handler=run_keygen)
    _add_keyid(subparsers)


#: The settings ``keyid`` and ``open-token`` read the keys from, as ``serve`` does.
KEY_SETTINGS = ("state_keys", "state_keys_file")
NO_KEYS = (
    "no state keys given: set CARDRULES_STATE_KEYS or CARDRULES_STATE_KEYS_FILE, or "
    "give --state-keys or --state-keys-file"
)


def misspelt_keys_hint() -> str:
    """For ``NO_KEYS``: ``; CARDRULES_STATE_KEY is set, which no setting reads: did you
    mean CARDRULES_STATE_KEYS?`` for each set variable that is a slip from a key
    setting's, as ``serve``'s start-up warning finds them (``did_you_mean``); else
    empty. Names only: the variable's value may be a key."""
    key_variables = {env_name(name) for name in KEY_SETTINGS}
    return "".join(
        f"; {name} is set, which no setting reads: did you mean {near}?"
        for name, near in variable_slips(unknown_variables())
        if near in key_variables
    )


def _add_keyid(subparsers: argparse._SubParsersAction[Any]) -> None:
    keyid = subparsers.add_parser(
        "keyid",
        help="print the id of each state key, as tokens and the metrics name it",
        description="Print the id of each state key given, one line per key in order, the "
        "first marked primary (it seals): the first 4 bytes of SHA-256 of the key's 32 decoded "
        "bytes, in hex, which state and seat tokens, the cardrules_state_sealing metric and "
        "TOKEN_UNKNOWN_KEY refusals carry. The keys are read as serve reads them; prefer the "
        "variables: every user of the machine can read a command line.",
    )
    # serve's own flags, so that help, refusals and a list given twice read the same.
    add_server_arguments(keyid, only=KEY_SETTINGS)
    keyid.set_defaults(handler=run_keyid)


def run_serve(args: argparse.Namespace) -> int:
    _hold_closed_std_descriptors()
    pending = pending_signals()  # SIGTERM stops the server cleanly, exit 0, from here at the latest
    try:
        config = resolve(args, stopped=lambda: bool(pending.received))
    except ConfigValueError as error:
        # A key given to another setting (a Secret wired to the wrong variable) is quoted
        # by that setting's refusal: never shown (design section 4).
        return _fail(hide_keys(str(error)))
    except StartStoppedError as stop:
        # Stopped during start-up as asked, with 0 as a stop while starting exits
        # (docs/operations.md, "Termination"); nothing was served, so nothing to drain.
        if sys.stderr is not None:
            print(
                f"cardrules: stopped by {pending.received[0].name} during start-up, before "
                f"serving: {hide_keys(str(stop))}",
                file=sys.stderr,
            )
        return 0
    if config.workers > 1 and not sys.platform.startswith("linux"):
        return _fail(_workers_need_linux(given_by(args, "workers", os.environ), config.workers))
    if sys.stdout is None:  # started with stdout closed (``>&-``): Python gives it None
        return _fail("stdout is closed: the log lines have nowhere to go")
    made_folder = None
    folder_variable = next(
        (name for name in (MULTIPROC_ENV, DEPRECATED_MULTIPROC_ENV) if name in os.environ), None
    )
    if folder_variable is not None:
        # prometheus_client switches to multiprocess mode on either name; the server
        # reads the current one only, so it adopts the old one as prometheus_client does.
        os.environ.setdefault(MULTIPROC_ENV, os.environ[folder_variable])
    if config.workers > 1 or folder_variable is not None:
        try:
            made_folder = prepare_multiprocess_dir(config.workers)
        except OSError as error:
            workers_source = given_by(args, "workers", os.environ) or "--workers"
            message = _unusable_folder(config.workers, workers_source, folder_variable, error)
            # In use clears once its holder stops (the draining orphans of a supervisor
            # killed outright): 1, as a port in use, which a supervisor may retry; 2 is
            # for a setting every start would refuse again.
            return _fail(message, 1 if isinstance(error, FolderInUseError) else 2)
    from service.logs import unbuffer_std_streams
    from service.server import serve

    unbuffer_std_streams()
    try:
        return serve(config, pending)
    finally:
        if made_folder is not None:
            shutil.rmtree(made_folder, ignore_errors=True)


def _workers_need_linux(source: str | None, workers: int) -> str:
    """Why ``--workers`` 2 or more (or its variable, ``source``) is refused outside Linux,
    before anything is made (docs/operations.md, "Workers"): SO_REUSEPORT spreads the
    connections over the workers' sockets on Linux alone (macOS gives every one to the
    socket bound last), and the supervisor waits for its workers with
    ``signal.sigtimedwait``, which macOS lacks."""
    return (
        f"{source or '--workers'} {workers} needs Linux, and this is {sys.platform}: "
        "elsewhere the kernel gives every connection to one of the workers; run a single "
        "process (no --workers)"
    )


def _hold_closed_std_descriptors() -> None:
    """Put ``/dev/null`` on stdin and stderr if the server was started with either
    closed (``<&-``, ``2>&-``), as daemons do: the next file opened took the free
    descriptor, so that grpc's core wrote its error lines (one per connection with a
    malformed ``grpc-timeout`` header, which any client can send) into the metrics folder's lock
    file, without bound, or onto a listening socket. Their lines and Python's are
    discarded then (docs/operations.md, "Configuration"). A closed stdout is refused
    later, with its own line; it is left closed, and nothing opened meanwhile stays open.
    """
    for descriptor in (0, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null == descriptor:
                os.set_inheritable(null, True)  # as a standard stream is
            else:  # a lower one was closed too: 1, to be refused
                os.dup2(null, descriptor)
                os.close(null)


def _unusable_folder(
    workers: int, workers_source: str, variable: str | None, error: OSError
) -> str:
    """Why the metrics folder stops the server, naming what asked for it: ``--workers``
    (or its variable), or with one process the folder's variable alone
    (docs/operations.md, "Workers"). A folder another server uses is writable: the
    line names the variable that named it, and says so."""
    if isinstance(error, FolderInUseError):
        return f"{variable or MULTIPROC_ENV}: {error}"
    if workers > 1 and variable is not None:
        # Told to set the variable it had set, an operator could only guess what to change.
        return (
            f"{workers_source} needs a writable folder for the workers' metrics, and the "
            f"one {variable} names cannot be used ({error}); set it to a writable folder "
            "with room for them, or unset it for a temporary one"
        )
    if workers > 1:  # the temporary folder could not be made or filled
        return (
            f"{workers_source} needs a writable folder for the workers' metrics ({error}); "
            f"set {MULTIPROC_ENV} to one"
        )
    return (
        f"{variable} is set, which keeps the metrics in files in that folder (prometheus "
        f"multiprocess mode), but the folder cannot be used ({error}); set it to a "
        "writable folder, or unset it"
    )


def _fail(message: str, status: int = 2) -> int:
    if sys.stderr is not None:
        print(f"cardrules: error: {message}", file=sys.stderr)
    return status


def run_keygen(args: argparse.Namespace) -> int:
    from service.cli import print_output
    from service.tokens import KeyRing

    return print_output(KeyRing.generate_key_text() + "\n")


def configured_keys(args: argparse.Namespace) -> KeyRing | None:
    """The state keys as ``serve`` reads them (``--state-keys``, ``--state-keys-file`` or
    their variables), from the key settings alone: a bad CARDRULES_GRPC_PORT is no reason
    to refuse to name or use the keys. None when none is given. Raises
    ``ConfigValueError`` as ``serve`` refuses a bad key (its message may quote a setting:
    pass it through ``hide_keys``)."""
    from service.tokens import KeyRing

    environ = {name: os.environ[name] for name in map(env_name, KEY_SETTINGS) if name in os.environ}
    given = argparse.Namespace(
        state_keys=args.state_keys, state_keys_file=args.state_keys_file, plain_state=None
    )
    keys = resolve(given, environ).state_keys
    return None if keys is None else KeyRing.parse(keys)  # resolve has checked them


def run_keyid(args: argparse.Namespace) -> int:
    """Print the id of each configured key, the primary first (docs/operations.md, "Key
    rotation", step 3): a backend checks its stored tokens' key ids against them."""
    from service.cli import print_output

    try:
        keys = configured_keys(args)
    except ConfigValueError as error:
        return _fail(hide_keys(str(error)))
    if keys is None:  # serve would make an ephemeral key, which no other process shares
        return _fail(NO_KEYS + misspelt_keys_hint())
    lines = keys.hex_ids()
    lines[0] += "  primary"  # the first key seals (docs/api.md, "State tokens")
    return print_output("".join(f"{line}\n" for line in lines))


TEMPORARY_PREFIX = "cardrules-metrics-"
#: Locked by the server that uses the folder, one it made (temporary) or one
#: ``PROMETHEUS_MULTIPROC_DIR`` named, for as long as it or any of its workers lives
#: (they inherit the descriptor across ``fork``). Not a ``*.db`` file: prometheus_client
#: never reads it, and the check for foreign files never sees it.
_LOCK_NAME = ".in-use"
_held: list[int] = []
#: A temporary folder still without its lock after this long lost its server before the
#: lock got its name (``_hold``), microseconds after the folder was made.
UNLOCKED_FOLDER_SECONDS = 60.0


def _some(names: list[str]) -> str:
    """The first three of ``names``, for a one-line refusal."""
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def prepare_multiprocess_dir(processes: int = 1) -> str | None:
    """Point prometheus at a folder shared by the workers (emptied later, once the ports
    are known free: ``metrics.clear_multiprocess_dir``).

    Returns the folder if it was made here (a temporary one, removed at exit),
    None if ``PROMETHEUS_MULTIPROC_DIR`` named it. Either is locked for as long as
    this process or a worker of it lives. Raises ``OSError`` when the folder cannot
    be made or written, another server uses it (``FolderInUseError``), or it has no
    room for the values of ``processes`` processes (``_check_room``).
    """
    folder = os.environ.get(MULTIPROC_ENV)
    if folder is None:
        remove_abandoned_folders(tempfile.gettempdir())
        made = tempfile.mkdtemp(prefix=TEMPORARY_PREFIX)
        os.environ[MULTIPROC_ENV] = made
        try:
            _hold(made)
            _check_room(made, processes)
        except OSError:
            shutil.rmtree(made, ignore_errors=True)
            raise
        return made
    if not folder.strip():
        # Path("") is the working folder, whose files would be taken for values.
        raise FileNotFoundError("the variable is set but empty")
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    if not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"{folder} is not writable")
    # prometheus_client reads every *.db file there as one of its own.
    databases = sorted(path.glob("*.db"))
    foreign = [name.name for name in databases if not MULTIPROC_VALUE_FILE.fullmatch(name.name)]
    if foreign:
        raise FileExistsError(
            f"{folder} holds files that are not prometheus_client's ({_some(foreign)}): "
            "give the metrics a folder of their own"
        )
    # A folder named as a file of values (lstat: a symbolic link is deleted as a file):
    # emptying the folder at start could not delete it, nor may it (the operator's), and
    # prometheus_client would fail to read it at every scrape.
    folders = [name.name for name in databases if stat.S_ISDIR(name.lstat().st_mode)]
    if folders:
        raise IsADirectoryError(
            f"{folder} holds folders named as prometheus_client's files of values "
            f"({_some(folders)}): move them out, or give the metrics a folder of their own"
        )
    # Before anything there is taken for an earlier run's: another server's values are
    # live (its room is not free, and ``metrics.clear_multiprocess_dir`` deletes them).
    _hold_given(folder)
    _check_room(folder, processes)
    return None


def _hold(folder: str) -> None:
    """Lock ``folder`` for as long as this process or a worker of it lives.

    The lock file gets its name only once it is locked: a server starting at the same
    time (``remove_abandoned_folders``) took a folder whose lock file was made but not
    yet locked for abandoned, and removed it under this one (16 in 300 starts beside a
    remover in a loop).
    """
    unnamed = os.path.join(folder, f"{_LOCK_NAME}.new")
    descriptor = os.open(unnamed, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(unnamed, os.path.join(folder, _LOCK_NAME))
    _held.append(descriptor)


class FolderInUseError(OSError):
    """Another cardrules server (or an orphaned worker of one) holds the lock of the
    metrics folder that ``PROMETHEUS_MULTIPROC_DIR`` names."""


def _hold_given(folder: str) -> None:
    """Lock the folder ``PROMETHEUS_MULTIPROC_DIR`` names, as ``_hold`` does a temporary
    one, or raise ``FolderInUseError``: emptying it at start deleted the values of
    another server that used it (two servers given the same folder), whose metrics
    then answered 503 until it was restarted, when it did the same to the other.

    The lock file is made if need be and never removed: a server that died left it
    unlocked (the kernel releases a dead process's locks), and the next one takes it.
    Opened to read only, so that a file another user's server left can be locked too.
    """
    path = os.path.join(folder, _LOCK_NAME)
    descriptor = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise FolderInUseError(
            f"another cardrules server uses {folder} for its metrics (it holds {path} "
            "locked), or the workers of one killed outright are still draining: give each "
            "server a folder of its own"
        ) from None
    except BaseException:
        os.close(descriptor)
        raise
    _held.append(descriptor)


def remove_abandoned_folders(parent: str) -> None:
    """Remove the temporary metrics folders of servers that are gone without removing
    theirs (killed with SIGKILL: the kubelet at the end of the grace period, the OOM
    killer). A pod's ``/tmp`` is an ``emptyDir`` that outlives its containers: each
    such restart left ``--workers`` times 128 KiB of a memory-backed 16 MiB behind,
    until a server could no longer start there. A folder whose lock is held (its server
    or an orphaned worker still runs) is left alone, and so is one that has no lock
    yet, unless it has had none for ``UNLOCKED_FOLDER_SECONDS``: its server was killed
    as it made it."""
    for folder in Path(parent).glob(f"{TEMPORARY_PREFIX}*"):
        try:
            descriptor = os.open(folder / _LOCK_NAME, os.O_RDWR)
        except FileNotFoundError:
            _remove_if_never_locked(folder)
            continue
        except OSError:  # not ours, or not a folder
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # in use
            continue
        else:
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(descriptor)


def _remove_if_never_locked(folder: Path) -> None:
    """Remove a temporary folder that has stayed without a lock: its server died between
    making it and naming its lock (``_hold``)."""
    try:
        info = folder.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode) and time.time() - info.st_mtime > UNLOCKED_FOLDER_SECONDS:
        shutil.rmtree(folder, ignore_errors=True)


def _check_room(folder: str, processes: int) -> None:
    """Raise ``OSError`` unless ``folder`` has room for the files of values that
    ``processes`` processes make at start: a full folder (a small tmpfs) stops the
    server here, rather than its workers as they start."""
    size = processes * BYTES_PER_PROCESS
    # What an earlier run left there is deleted before any worker starts
    # (``metrics.clear_multiprocess_dir``): the room it takes counts as free.
    stale = 0
    for path in Path(folder).glob("*.db"):
        with contextlib.suppress(FileNotFoundError):
            stale += path.stat().st_blocks * 512
    if size <= stale:
        return
    with tempfile.TemporaryFile(dir=folder) as probe:
        reserve(probe.fileno(), size - stale, folder)
