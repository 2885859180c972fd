# emqd in a small image: `docker run -e EMQD_REQUIREPASS=... -p 6390:6390 -p 6391:6391 -v emqd:/data emqd`
# It listens on every interface, so it refuses to start without a password
# (protected mode, protocol section 10), which the dashboard and /metrics on
# 6391 then ask for too (HTTP basic auth). The append-only file lives in /data.
#
# The first stage has a C compiler and builds the wheel with the compiled core
# (setup.py, mypyc); the image itself carries only the wheel's result.
FROM python:3.11 AS build
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY emqd ./emqd
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && python -c "import emqd, sys; sys.exit(emqd.core_build() != 'mypyc')" \
    && useradd --system --uid 10001 --home-dir /data emqd \
    && mkdir -p /data \
    && chown emqd /data

USER emqd
WORKDIR /data
VOLUME /data
EXPOSE 6390 6391
# past 1 GB of data, ADD and other writes that add data answer -OOM (docs/SERVER.md, Memory)
ENV EMQD_MAXMEMORY=1gb
STOPSIGNAL SIGTERM
ENTRYPOINT ["emqd", "--bind", "0.0.0.0", "--dir", "/data"]
