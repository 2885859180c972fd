# emqd in a small image: `docker run -e EMQD_REQUIREPASS=... -p 6390:6390 -p 6391:6391 -v emqd:/data emqd`
# It listens on every interface, so it refuses to start without a password
# (protected mode, protocol section 10), which the dashboard and /metrics on
# 6391 then ask for too (HTTP basic auth). The append-only file lives in /data.
#
# The build reads no network: the wheels (emqd's, with its core compiled by
# mypyc, and its dependencies') are made beforehand in ./wheels and installed
# with --no-index, which also makes the image reproducible from them:
#
#   python3 -m pip wheel --wheel-dir wheels . && docker build -t emqd .
#
# (scripts/docker-check does all of it, and runs a job through the image.) The
# wheels must suit the image: CPython 3.11 on Linux, the machine's architecture;
# on another system, make them in a container of the base image. BASE is the
# image to build on: any Debian-like one with Python 3.11, python3 -m venv and
# useradd (CI builds on a Debian 12 root file system made by mmdebstrap).
ARG BASE=python:3.11-slim
FROM ${BASE}

COPY wheels /wheels
RUN python3 -m venv /opt/emqd \
    && /opt/emqd/bin/pip install --no-cache-dir --no-index --find-links /wheels emqd \
    && rm -rf /wheels \
    && /opt/emqd/bin/python -c "import emqd, sys; sys.exit(emqd.core_build() != 'mypyc')" \
    && useradd --system --uid 10001 --home-dir /data emqd \
    && mkdir -p /data \
    && chown emqd /data

ENV PATH=/opt/emqd/bin:$PATH
USER emqd
WORKDIR /data
VOLUME /data
EXPOSE 6390 6391
# past 1 GB of data, ADD and other writes that add data answer -OOM (docs/SERVER.md, Memory)
ENV EMQD_MAXMEMORY=1gb
STOPSIGNAL SIGTERM
ENTRYPOINT ["emqd", "--bind", "0.0.0.0", "--dir", "/data"]
