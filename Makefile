# kubejoule — the two commands that matter: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv test demo bench lint typecheck system-deps clean protos

venv: $(STAMP)

# torch is installed first and pinned: a bare torch requirement with no torch present
# would pull a multi-GB CUDA build. The project then installs editable with all extras.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[scheduler,ml,dev]'
	touch $(STAMP)

# Debian packages the integration tests use (a real Prometheus). Installed only when missing;
# needs root, as CI is.
system-deps:
	@(command -v prometheus && command -v shellcheck) >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus shellcheck iproute2) >/dev/null || echo "warning: could not install prometheus/shellcheck; their tests will be skipped (and fail with CI=true)"; \
	    service prometheus stop >/dev/null 2>&1 || true; \
	  else echo "note: not root, prometheus not installed; its tests will be skipped (and fail with CI=true)"; fi; }

lint: venv
	$(BIN)/ruff check agent scheduler rl tests benchmarks
	$(BIN)/mypy

test: venv system-deps lint
	$(BIN)/pytest -q -p no:cacheprovider -rs

# The main job on this host: the agent measures it once (with an example calibration profile,
# labelled "estimated", where the host has no RAPL), then the scheduling benchmark runs the
# bundled heterogeneous scenario with power-off against the default kube-scheduler and its peers.
DEMO_PROFILE ?= agent/profiles/ibm-x3550-m3-xeon-x5675.yaml
DEMO_OUT ?= out
demo: venv
	@mkdir -p $(DEMO_OUT)
	@echo "== kubejoule-agent once on this host"
	@if [ -d /sys/class/powercap ] && ls /sys/class/powercap | grep -q ':'; then \
	  $(BIN)/kubejoule-agent once --interval 2; \
	else \
	  echo "(no RAPL here: node power is estimated from the example profile $(DEMO_PROFILE))"; \
	  $(BIN)/kubejoule-agent once --interval 2 --calibration $(DEMO_PROFILE); \
	fi
	@echo
	@echo "== kubejoule-rl benchmark: heterogeneous cluster with power-off"
	$(BIN)/kubejoule-rl benchmark --scenario heterogeneous-poweroff --out $(DEMO_OUT)/results.json --plot $(DEMO_OUT)/results.png
	@echo "results: $(DEMO_OUT)/results.json, plots: $(DEMO_OUT)/results.png"

# The gRPC expander's protobuf code (committed; a test checks it matches its .proto files).
protos: venv
	$(BIN)/python -m scheduler.autoscaler.protos.generate

bench: venv
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
