# cardrules: the stateless rules service (design section 6), as an OCI image.
#
#   docker build -t cardrules .        (or: podman build --format docker -t cardrules .)
#   CARDRULES_STATE_KEYS="$(cardrules keygen)" \
#   docker run --rm --stop-timeout 20 -p 50051:50051 -p 8080:8080 -p 9464:9464 \
#       -e CARDRULES_STATE_KEYS cardrules
#
# -e with the name alone passes the key on from docker's environment: as its value the
# key would be among docker's arguments, which every user of the machine can read (ps).
#
# --stop-timeout 20: a stop takes up to about 12 s (drain delay, grace period, closing),
# 16 s with --workers N and a worker that does not stop, and the default 10 s would end
# it with SIGKILL (docs/operations.md, "The image").
#
# The base is pinned by tag; a release build should pin it by digest too
# (python:3.11-slim@sha256:...), see docs/operations.md.

# ---- builder: a virtual environment with the hash-pinned runtime lock and the project ----
FROM python:3.11-slim AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src

# Wheels only, every file checked against the lock's hashes: nothing is compiled,
# so the builder needs no compiler either. hatchling (build backend) is in the
# lock so that the project itself builds without fetching anything else.
# --no-compile: the bytecode is written once, at the end of the next step.
COPY requirements/runtime.lock requirements/runtime.lock
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --no-compile --require-hashes \
        --only-binary=:all: -r requirements/runtime.lock

# The server imports the generated stubs from the client package (cardrules-client).
COPY pyproject.toml ./
COPY engine engine
COPY service service
COPY clients/python clients/python
# Then the build backend and its helpers go (pip check proves that nothing installed
# depends on them; tests/deploy/test_image_builder.py holds the list to the lock),
# and last the installers themselves: the final stage gets a venv that can run the
# service and nothing else.
# The bytecode is compiled last, hash-based: pip's .pyc files carry each source's
# mtime, so two builds of the same inputs differed in them; these carry the source's
# hash, the same bytes from the same inputs. "unchecked": the image is immutable, so
# the sources cannot change under their .pyc files, and an import need not hash them.
RUN /opt/venv/bin/pip install --no-cache-dir --no-compile \
        --no-deps --no-build-isolation ./clients/python . \
    && /opt/venv/bin/pip uninstall --yes hatchling editables packaging pathspec pluggy \
        tomlkit trove-classifiers \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/python -m pip uninstall --yes setuptools pip \
    && /opt/venv/bin/python -m compileall -q --invalidation-mode unchecked-hash /opt/venv

# ---- runtime: the base image, the venv and an unprivileged user; no compiler, no cache ----
FROM python:3.11-slim

# OCI annotations; the version is the project's (a test holds it to pyproject.toml).
LABEL org.opencontainers.image.title="cardrules" \
      org.opencontainers.image.description="Stateless card-game rules over gRPC and HTTP/JSON" \
      org.opencontainers.image.version="0.1.0"

# A fixed numeric UID/GID so that Kubernetes runAsNonRoot can verify it. Not --system:
# useradd warns that 10001 is above SYS_UID_MAX. --no-log-init, as Docker advises for
# a large UID: useradd may otherwise write a non-system user's lastlog/faillog record
# at an offset set by the UID, a sparse file the image's layer can store in full.
# Then the standard library's bytecode, once, hash-based as the venv's: the official
# base deletes every .pyc under /usr/local, and with PYTHONDONTWRITEBYTECODE and a
# read-only root nothing can write them, so each start and each HEALTHCHECK (every
# 15 s) compiled the modules it imports from source (about twice the CPU; see
# docs/operations.md, "The image"). The interpreter names its own path (/usr/local/lib
# on the official base, /usr/lib on a Debian one). Left out: the tests, the GUI and
# 2to3, ensurepip, and site-packages (the base's pip, which the venv does not see).
# -B: without it these two interpreters write timestamp-based .pyc files for what they
# import (PYTHONDONTWRITEBYTECODE is set below), and compileall keeps those.
RUN groupadd --gid 10001 cardrules \
    && useradd --uid 10001 --gid 10001 --no-create-home --no-log-init \
        --home-dir /nonexistent --shell /usr/sbin/nologin cardrules \
    && python -B -m compileall -q --invalidation-mode unchecked-hash \
        -x '/(test|tests|idlelib|tkinter|turtledemo|lib2to3|ensurepip|site-packages)/' \
        "$(python -B -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"

COPY --from=builder /opt/venv /opt/venv

# JSON logs: a container has no terminal, and log collectors read JSON lines.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CARDRULES_LOG_FORMAT=json

USER 10001:10001

# gRPC, HTTP/JSON gateway, Prometheus metrics.
EXPOSE 50051 8080 9464

# Docker/Podman only (Kubernetes uses the native gRPC probes of k8s/): ask the
# standard health service for "readiness" where the server listens. The check runs
# apart from the server and cannot see its flags: service/healthcheck.py reads
# CARDRULES_HOST and CARDRULES_GRPC_PORT with the server's own parser, so that the
# two agree on every value (a wildcard host is reached on 127.0.0.1).
HEALTHCHECK --interval=15s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-m", "service.healthcheck"]

# Exec form: the server is PID 1 and gets SIGTERM itself. It handles SIGTERM
# (readiness NOT_SERVING, keep serving for --drain-delay-seconds, then finish
# in-flight calls within --grace-seconds, exit 0), and it reaps what an init process
# would: the processes an exec leaves behind (one worker ignores SIGCHLD, so the kernel
# reaps them; the supervisor of --workers N waits for them). No init process is needed.
ENTRYPOINT ["cardrules", "serve"]
