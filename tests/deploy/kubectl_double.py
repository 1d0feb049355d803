"""A stand-in for ``kubectl``, for the state key commands of docs/operations.md.

It takes only the commands those steps run, keeps the Secret ``cardrules-state-keys``
in the JSON file ``$KUBECTL_DOUBLE_STATE`` (its ``data`` base64, as the cluster keeps
it) and appends every command to that file's ``calls``, and the body of every patch,
read from stdin, to its ``patches``. Anything else fails loudly, so
a step that starts running another command fails its test rather than passing
unexamined: ``apply`` above all, which would copy the keys into an annotation
(docs/operations.md). So does a command with a state key among its arguments, which
every user of the operator's machine can read (``ps``, ``/proc/PID/cmdline``).
``create secret generic`` is run by the real kubectl beside this Python, client side
only (``--dry-run=client``), and the Secret it prints becomes the double's Secret.
``$KUBECTL_DOUBLE_FAIL_GET`` set makes ``get`` fail, as with no access. The
Secret and the Deployment are in the namespace ``$KUBECTL_DOUBLE_NAMESPACE``
(``cardrules`` unless set): a command for another one fails.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

SECRET = "cardrules-state-keys"
KUBECTL = Path(sys.executable).parent / "kubectl"
#: 32 bytes in base64 (either alphabet, padding optional), standing alone: a state key.
KEY = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{43}=?(?![A-Za-z0-9+/=_-])")


def main(argv: list[str]) -> int:
    # Commands may run at once: the state is read and written under a lock, so none
    # loses another's work.
    state_file = Path(os.environ["KUBECTL_DOUBLE_STATE"])
    with state_file.open("r+") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        state: dict[str, Any] = json.load(file)
        state["calls"].append(argv)
        try:
            if any(KEY.search(argument) for argument in argv):
                print(
                    "kubectl double: a state key on the command line, which every user "
                    "of this machine can read (ps): pass it on stdin",
                    file=sys.stderr,
                )
                return 2
            return run(argv, state)
        finally:
            file.seek(0)
            file.truncate()
            json.dump(state, file)


def run(argv: list[str], state: dict[str, Any]) -> int:
    data: dict[str, str] = state["secret"]
    namespace = os.environ.get("KUBECTL_DOUBLE_NAMESPACE", "cardrules")
    in_namespace = argv[:1] == ["-n"]
    if in_namespace and argv[1] != namespace:
        print(f'Error from server (NotFound): namespaces "{argv[1]}" not found', file=sys.stderr)
        return 1
    match in_namespace, argv[2:] if in_namespace else argv:
        case True, ["get", "secret", name, "-o", jsonpath] if name == SECRET:
            if os.environ.get("KUBECTL_DOUBLE_FAIL_GET"):
                print("Error from server (Forbidden): secrets is forbidden", file=sys.stderr)
                return 1
            key = jsonpath.removeprefix("jsonpath={.data.").removesuffix("}")
            print(data.get(key, ""), end="")  # as kubectl: nothing for a missing entry
            return 0
        case True, ["patch", "secret", name, "--type", "merge", "--patch-file", "/dev/stdin"] if (
            name == SECRET
        ):
            patch = sys.stdin.read()
            state.setdefault("patches", []).append(patch)
            for key, value in json.loads(patch)["stringData"].items():
                data[key] = base64.b64encode(value.encode()).decode()
            return 0
        case True, ["create", "secret", "generic", name, *options] if name == SECRET:
            return create(argv[1], name, options, state)
        case True, ["rollout", "restart" | "status", "deployment/cardrules"]:
            return 0
    print(f"kubectl double: not a command of the state key steps: {argv}", file=sys.stderr)
    return 2


def create(namespace: str, name: str, options: list[str], state: dict[str, Any]) -> int:
    """The Secret the real kubectl makes of these options (stdin passes through to it)."""
    command = [str(KUBECTL), "-n", namespace, "create", "secret", "generic", name, *options]
    done = subprocess.run(
        [*command, "--dry-run=client", "-o", "json"], stdout=subprocess.PIPE, text=True, check=False
    )
    if done.returncode == 0:
        state["secret"] = json.loads(done.stdout).get("data", {})
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
