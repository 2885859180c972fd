# emqd in a small image: `docker run -e EMQD_REQUIREPASS=... -p 6390:6390 -p 6391:6391 -v emqd:/data emqd`
# It listens on every interface, so it refuses to start without a password
# (protected mode, protocol section 10), which the dashboard and /metrics on
# 6391 then ask for too (HTTP basic auth). The append-only file lives in /data.
FROM python:3.11-slim

WORKDIR /src
COPY pyproject.toml README.md ./
COPY emqd ./emqd
RUN pip install --no-cache-dir . \
    && rm -rf /src \
    && useradd --system --uid 10001 --home-dir /data emqd \
    && mkdir -p /data \
    && chown emqd /data

USER emqd
WORKDIR /data
VOLUME /data
EXPOSE 6390 6391
STOPSIGNAL SIGTERM
ENTRYPOINT ["emqd", "--bind", "0.0.0.0", "--dir", "/data"]
