# syntax=docker/dockerfile:1
# The simulator's image: `kubejoule-rl benchmark`, `gate`, `merge` and `trace` (the agent,
# scheduler and rl packages with the `scheduler` and `sim` extras). Without torch and gymnasium:
# training (`kubejoule-rl train`) and the gymnasium environment need the `ml` extra instead.
# It runs a big sweep as a Kubernetes Indexed Job (daemonset/jobs/). Build from the repository
# root:
#   docker build -f daemonset/images/rl.Dockerfile -t ghcr.io/kubejoule/kubejoule-rl:0.1.0 .
# The base image is pinned by tag here: pin it by digest where you build, e.g.
#   --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<digest of your mirror's copy>
# (the digest could not be read where this file was written: no registry access).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY daemonset/images/locks/rl.txt ./requirements.lock
COPY common ./common
COPY agent ./agent
COPY scheduler ./scheduler
COPY rl ./rl
# The dependencies exactly as locked, versions and hashes (daemonset/images/locks/rl.txt,
# which tests/deploy checks against pyproject.toml), then the package alone: nothing resolved
# at build time.
RUN pip wheel --no-cache-dir --require-hashes --wheel-dir /wheels -r requirements.lock \
    && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels ".[scheduler,sim]"

FROM ${PYTHON_IMAGE}
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "kubejoule[scheduler,sim]" \
    && rm -rf /wheels
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/matplotlib
# Any non-root user: the simulator reads its inputs and writes its results, nothing else.
USER 65532:65532
ENTRYPOINT ["kubejoule-rl"]
CMD ["scenarios"]
