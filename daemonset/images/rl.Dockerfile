# syntax=docker/dockerfile:1
# The simulator's image: `kubejoule-rl benchmark`, `gate`, `merge` and `trace` (the agent,
# scheduler and rl packages with the `scheduler` and `sim` extras). Without torch and gymnasium:
# training (`kubejoule-rl train`) and the gymnasium environment need the `ml` extra instead.
# It runs a big sweep as a Kubernetes Indexed Job (daemonset/jobs/). Build from the repository
# root:
#   docker build -f daemonset/images/rl.Dockerfile -t ghcr.io/kubejoule/kubejoule-rl:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY agent ./agent
COPY scheduler ./scheduler
COPY rl ./rl
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[scheduler,sim]"

FROM ${PYTHON_IMAGE}
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "kubejoule[scheduler,sim]" \
    && rm -rf /wheels
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/matplotlib
# Any non-root user: the simulator reads its inputs and writes its results, nothing else.
USER 65532:65532
ENTRYPOINT ["kubejoule-rl"]
CMD ["scenarios"]
