# tickwork: one image for every process (tickwork run | scheduler | worker | api | migrate).
# docs/deploy.md: how to build it, what it runs, and how it was checked.

# -- build: wheels of tickwork and its postgres and redis extras -----------------------------
FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir --upgrade pip
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[postgres,redis]'

# -- run: the wheels installed, no compiler, no sources, a user without rights ----------------
FROM python:3.11-slim
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels 'tickwork[postgres,redis]' \
    && useradd --system --uid 10001 --home-dir /var/lib/tickwork --create-home tickwork
# Every process listens on 0.0.0.0:8000 in the container: the API and dashboard
# (tickwork api, tickwork run) on TICKWORK_HOST:TICKWORK_PORT; a scheduler's or worker's
# /metrics and /healthz on TICKWORK_METRICS_ADDRESS. One port, one health check for all.
ENV PYTHONUNBUFFERED=1 \
    TICKWORK_HOST=0.0.0.0 \
    TICKWORK_PORT=8000 \
    TICKWORK_METRICS_ADDRESS=0.0.0.0:8000
USER 10001
WORKDIR /var/lib/tickwork
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
ENTRYPOINT ["tickwork"]
# SQLite in /var/lib/tickwork; compose.yaml and deploy/k8s/ run the PostgreSQL processes.
CMD ["run"]
