# kubejoule — the two commands that matter: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: locks venv test e2e demo bench lint typecheck system-deps clean protos train k8s-tools k8s-bin-dir chart docs

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
	$(BIN)/ruff check agent scheduler rl tests benchmarks common grafana tools/docs
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo

test: venv system-deps k8s-tools lint
	KUBEJOULE_K8S_BIN=$(K8S_BIN) $(BIN)/pytest -q -p no:cacheprovider -rs

# The end-to-end tests alone: real etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# KWOK and helm (tools/k8s, built once into a cache outside the checkout).
e2e: venv k8s-tools
	KUBEJOULE_K8S_BIN=$(K8S_BIN) $(BIN)/pytest -q -p no:cacheprovider -rs -m e2e tests/e2e

# The real Kubernetes components, built from the Go module proxy (tools/k8s/build.sh): the first
# time takes long (docs/how-to/real-kubernetes.md), later runs find them in the cache.
K8S_BIN = $(shell tools/k8s/build.sh --bin-dir)
k8s-tools:
	@tools/k8s/build.sh

k8s-bin-dir:
	@echo $(K8S_BIN)

# The Helm chart, linted and packaged: out/kubejoule-VERSION.tgz, VERSION being the project's
# (Chart.yaml follows pyproject.toml; tests/deploy/test_chart.py checks they agree).
chart: k8s-tools
	$(K8S_BIN)/helm lint --strict daemonset/chart/kubejoule
	$(K8S_BIN)/helm package daemonset/chart/kubejoule --destination out

# The main job on this host: the agent measures it once (with an example power profile,
# labelled "estimated", where the host has no RAPL), then the scheduling benchmark runs the
# headline: the heterogeneous cluster as cluster-autoscaler node groups under its shipped
# defaults (DaemonSets on every node, lagging telemetry, the trace's PDBs), kube-scheduler and
# kubejoule × the least-waste and kubejoule expanders, kube-scheduler with the random one, the
# recommended setup, the extender at weights 1/5/12, bin packing and the peers, the default seeds
# (each its own workload, paired: rl/evaluation/paired.py) in one process per CPU, with the
# issues' targets. Budget: <= 5 minutes on 2 cores (measured: docs/results.md).
DEMO_PROFILE ?= agent/power_profiles/ibm-x3550-m3-xeon-x5675.yaml
DEMO_OUT ?= out
demo: venv
	@mkdir -p $(DEMO_OUT)
	@echo "== kubejoule-agent once on this host"
	@if [ -d /sys/class/powercap ] && ls /sys/class/powercap | grep -q ':'; then \
	  $(BIN)/kubejoule-agent once --interval 2; \
	else \
	  echo "(no RAPL here: node power is estimated from the example profile $(DEMO_PROFILE))"; \
	  $(BIN)/kubejoule-agent once --interval 2 --power-profile $(DEMO_PROFILE); \
	fi
	@echo
	@echo "== kubejoule-rl benchmark: the headline, heterogeneous cluster under cluster-autoscaler"
	$(BIN)/kubejoule-rl benchmark --scenario heterogeneous-autoscaler --out $(DEMO_OUT)/results.json --plot $(DEMO_OUT)/results.png
	@echo "results: $(DEMO_OUT)/results.json, plots: $(DEMO_OUT)/results.png"

# The protobuf code of the agent's PodResources client and the gRPC expander (committed; tests
# check it matches its .proto files).
protos: venv
	$(BIN)/python -m agent.protos.generate
	$(BIN)/python -m scheduler.autoscaler.protos.generate

# The images' Python dependencies, locked with hashes (daemonset/images/locks/), at the versions
# the venv tests. Needs uv (https://docs.astral.sh/uv/, MIT/Apache-2.0) on PATH.
locks: venv
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^kubejoule' > .locks-constraints.txt
	for spec in "agent:" "scheduler:--extra scheduler" "rl:--extra scheduler --extra sim"; do \
	  image=$${spec%%:*}; extras=$${spec#*:}; out=daemonset/images/locks/$$image.txt; \
	  head -3 $$out > $$out.new; \
	  uv pip compile pyproject.toml $$extras --universal --python-version 3.11 --generate-hashes \
	    --no-header --quiet -c .locks-constraints.txt >> $$out.new && mv $$out.new $$out; \
	done; rm -f .locks-constraints.txt

bench: venv
	$(BIN)/python benchmarks/run_all.py

# The learned scorers in models/ and their gate reports (models/README.md, docs/learned.md):
# the DQN with credit on the action from an exact step budget (rollouts in 2 processes: the
# same weights for any --jobs), the MLP from a decision log the simulator writes on random
# training clusters (seed 2; never rl/heldout), both gated on rl/heldout against the shipped
# default profile and bin packing, then the headline scenario. Budget: <= 30 minutes on 2
# cores (measured: models/README.md); torch uses one thread per process. DQN_STEPS was chosen
# on a validation set from training seeds, never on rl/heldout.
DQN_STEPS ?= 70000
train: venv
	@mkdir -p models
	$(BIN)/kubejoule-rl train --algo dqn --seed 1 --steps $(DQN_STEPS) --jobs 2 --out models/dqn.pt --no-progress
	rm -f models/decisions-train.jsonl
	$(BIN)/python -m rl.cmd.decision_log_cli --out models/decisions-train.jsonl --clusters 16 --seed 2
	$(BIN)/kubejoule-rl train --algo mlp --decisions models/decisions-train.jsonl --seed 1 --out models/mlp.pt
	$(BIN)/kubejoule-rl gate --candidate models/dqn.npz --heldout rl/heldout --out models/dqn-gate.json --report models/dqn-gate.md --jobs 2 --no-progress
	$(BIN)/kubejoule-rl gate --candidate models/mlp.npz --heldout rl/heldout --out models/mlp-gate.json --report models/mlp-gate.md --jobs 2 --no-progress
	$(BIN)/kubejoule-rl benchmark --scenario heterogeneous-autoscaler --policies heuristic,learned:models/dqn.npz,learned:models/mlp.npz,peaks,trimaran,default --expanders kubejoule --seeds 3 --jobs 2 --out models/headline.json --no-progress

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# The documentation site (MkDocs, Material theme): served on http://127.0.0.1:8000 while you edit.
# tests/test_docs_site.py builds it with --strict in `make test`.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000
