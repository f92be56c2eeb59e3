# The two commands: `make preview` (offline preview of a stack) and `make test`.
# On a fresh machine both bootstrap uv and the locked environment; only python3 and make are assumed.
# `make preview` installs what the program needs; `make test` adds the dev tools (linters, test libraries).

UV_VERSION := 0.13.8
TOOLS := .tools
UV := $(TOOLS)/bin/uv
# uv must use this machine's python3, never download a Python build of its own.
export UV_PYTHON_DOWNLOADS := never
export UV_PYTHON := python3
# Python writes each module's bytecode the first time it imports it, so a preview compiles only what it uses
# (a few seconds once) instead of uv compiling every SDK module at install. Some machines (CI among them) set
# PYTHONDONTWRITEBYTECODE, which would make every process compile pulumi_kubernetes again.
unexport PYTHONDONTWRITEBYTECODE
# uv's own progress bars go away; its errors do not.
export UV_NO_PROGRESS := 1

STACK ?= prod
OUT ?= build/$(STACK)
ARGS ?=
# make echoes each command it runs, into the terminal and CI logs: a credential in ARGS would be printed with it.
# A command whose ARGS carry a flag whose value is a credential (config/secrets.py SECRET_FLAGS: the two are held
# equal by tests/test_make_secrets.py) or a URL with a login (`http://user:password@host`) runs without the echo,
# and make says so instead. Every recipe that passes $(ARGS) starts with this (the same test checks each one).
SECRET_FLAGS := --secret --prometheus-password --prometheus-token
ARGS_CREDENTIAL = $(strip $(foreach flag,$(SECRET_FLAGS),$(findstring $(flag),$(ARGS))) \
  $(foreach word,$(ARGS),$(if $(findstring ://,$(word)),$(findstring @,$(word)))))
NO_ECHO_IF_SECRET = $(if $(ARGS_CREDENTIAL),$(info make $@: the command is not shown: ARGS carries a credential)@)
# The upstream reference data the contract tests read (refdata/sources.py): `make upstream` fetches it into
# .upstream/, where the tests find it; without that folder, a ../shared/upstream beside the clone (this build
# machine's mirror) is used as it is. GPU_POOL_UPSTREAM_DIR, when set, wins.
UPSTREAM_DEST := .upstream
UPSTREAM_FROM ?=
ifeq ($(wildcard $(UPSTREAM_DEST)/.complete),)
export GPU_POOL_UPSTREAM_DIR ?= $(wildcard $(abspath ../shared/upstream))
endif

RUNTIME := .venv/.synced-runtime
DAY2 := .venv/.synced-day2
DEV := .venv/.synced-dev

.PHONY: preview diff check docs chart claims doctor test lint bench bench-update clean upstream

# With a pip at hand, uv lands in .tools without creating a venv (ensurepip alone takes seconds); without one,
# a venv's bundled pip installs it.
$(UV):
	@echo "setting up uv $(UV_VERSION) in $(TOOLS)/ (once)"
	@mkdir -p $(TOOLS)/bin
	@if python3 -m pip --version >/dev/null 2>&1; then \
	  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
	    --target $(TOOLS)/uv-package uv==$(UV_VERSION) && ln -sf ../uv-package/bin/uv $(UV); \
	else \
	  python3 -m venv $(TOOLS)/venv && $(TOOLS)/venv/bin/pip install --quiet --disable-pip-version-check \
	    uv==$(UV_VERSION) && ln -sf ../venv/bin/uv $(UV); \
	fi

# --inexact: a smaller sync after `make test` keeps the other packages instead of uninstalling them.
$(RUNTIME): $(UV) pyproject.toml uv.lock
	@echo "installing the locked runtime packages into .venv/"
	@$(UV) sync --locked --no-default-groups --inexact --quiet
	@touch $@

$(DAY2): $(RUNTIME)
	@echo "installing the day-2 tool's packages into .venv/"
	@$(UV) sync --locked --no-default-groups --group day2 --inexact --quiet
	@touch $@

$(DEV): $(UV) pyproject.toml uv.lock
	@echo "installing the locked runtime, day-2 and dev packages into .venv/"
	@$(UV) sync --locked --quiet
	@touch $@ $(RUNTIME) $(DAY2)

preview: $(RUNTIME)
	$(NO_ECHO_IF_SECRET)$(UV) run --no-sync python -m offline.preview --stack $(STACK) --out $(OUT) $(ARGS)

# What a config change will do: make diff STACK=prod BEFORE=path/to/earlier/Pulumi.prod.yaml [AFTER=...]
# [NODES=<a saved kubectl get nodes -o json>: plan against the cluster as it is, e.g. after a failed wave]
BEFORE ?=
AFTER ?=
NODES ?=
diff: $(RUNTIME)
	@test -n "$(BEFORE)" || { echo "make diff needs BEFORE=<an earlier Pulumi.$(STACK).yaml> (a path, named so), e.g.: mkdir -p /tmp/old && git show HEAD~1:Pulumi.$(STACK).yaml > /tmp/old/Pulumi.$(STACK).yaml && make diff STACK=$(STACK) BEFORE=/tmp/old/Pulumi.$(STACK).yaml" >&2; exit 2; }
	$(NO_ECHO_IF_SECRET)$(UV) run --no-sync python -m offline.diff --stack $(STACK) --before $(BEFORE) $(if $(AFTER),--after $(AFTER)) $(if $(NODES),--nodes $(NODES)) --out $(OUT) $(ARGS)

# The Kubernetes schema (and, with ../shared/upstream, CRD) contract on one stack's manifests.
check: $(DEV)
	$(NO_ECHO_IF_SECRET)GPU_POOL_CHECK_STACK=$(STACK) $(UV) run --no-sync pytest tests/contract/test_preview_manifests_contract.py $(ARGS)

# docs/config-reference.md and docs/stack-config.schema.json from the config models.
docs: $(RUNTIME)
	$(UV) run --no-sync python -m config.schema_export docs

# The stack's pinned gpu-operator chart into charts/ (helm and the chart repository needed, once), for
# gpuOperator.chart: the chart from disk, its CRDs registered by the program. make chart STACK=prod
chart: $(RUNTIME)
	$(NO_ECHO_IF_SECRET)$(UV) run --no-sync python -m offline.chart_pull --stack $(STACK) $(ARGS)

# The day-2 tool: make claims ARGS="--stack prod" / make doctor ARGS="rke2-worker-dc1-gpu-a --stack prod"
claims: $(DAY2)
	$(NO_ECHO_IF_SECRET)$(UV) run --no-sync gpu-pool claims $(ARGS)

doctor: $(DAY2)
	$(NO_ECHO_IF_SECRET)$(UV) run --no-sync gpu-pool doctor $(ARGS)

# The pinned upstream files from their public sources (helm pull, go mod download, pulumi package get-schema, GitHub;
# the e2e tier's source trees from GitHub's source archives: the build scripts read .upstream/ first),
# each checked against refdata/digests.json, into .upstream/; UPSTREAM_FROM=<dir> takes them from a mirror instead.
upstream: $(RUNTIME)
	$(UV) run --no-sync python -m refdata.fetch --dest $(UPSTREAM_DEST) $(if $(UPSTREAM_FROM),--from $(abspath $(UPSTREAM_FROM)))

# mypy's cache beside uv's, shared by every clone and worktree of the project: a fresh clone type-checks in under a
# second instead of seven. mypy checks each cached entry against its source's size and hash, so a clone never takes
# another's result for a file that differs.
MYPY_CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gpu-pool/mypy
lint: export MYPY_CACHE_DIR := $(MYPY_CACHE_DIR)
lint: $(DEV)
	$(UV) run --no-sync ruff check .
	$(UV) run --no-sync ruff format --check .
	$(UV) run --no-sync mypy

# pytest-xdist: `auto` is one worker more than the cores (tests/conftest.py says why); TEST_WORKERS=0 runs it in one
# process.
TEST_WORKERS ?= auto
test: lint
	$(NO_ECHO_IF_SECRET)$(UV) run --no-sync pytest -n $(TEST_WORKERS) $(ARGS)

# Measures into build/BENCHMARKS.md; `make bench-update` rewrites the tracked BENCHMARKS.md. BENCH_RUNS: measured
# runs of every case (medians of at least 5 for the record; `make bench BENCH_RUNS=1` for a quick look while
# developing). BENCH_SCALE_DOMAINS: the sizes of the scaled real-engine case. Exits 1 when a held ratio regressed.
BENCH_RUNS ?= 5
BENCH_SCALE_DOMAINS ?= 30,100
BENCH_FLAGS = --runs $(BENCH_RUNS) --engine-runs $(BENCH_RUNS) --engine-scale-runs $(BENCH_RUNS) \
  --engine-scale-domains $(BENCH_SCALE_DOMAINS)
bench: $(DEV)
	$(NO_ECHO_IF_SECRET)$(UV) run --no-sync python -m benchmarks.run --output build/BENCHMARKS.md $(BENCH_FLAGS) $(ARGS)

bench-update: $(DEV)
	$(NO_ECHO_IF_SECRET)$(UV) run --no-sync python -m benchmarks.run --output BENCHMARKS.md $(BENCH_FLAGS) $(ARGS)

clean:
	rm -rf build .venv $(TOOLS) $(UPSTREAM_DEST)

# --- e2e tier (issue 12): a real etcd + kube-apiserver, built from the Go modules pinned in e2e/, under pytest.
# Binaries are cached in $(E2E_BIN) (outside git) and rebuilt only when a pin changes; the first build takes minutes.
E2E_BIN := $(TOOLS)/e2e/bin
# The real Pulumi engine (issue 16): the CLI, the Python language host and the three providers at the versions in
# e2e/engine/versions.env. ENGINE=auto (default): yours (`pulumi` on PATH, `pulumi plugin ls`) when all of it is at
# those versions, else built from source (e2e/engine/ and the pulumi-build sources, about 45 minutes of both cores
# cold); ENGINE=installed or ENGINE=source insists on one (CI: source). e2e/select-engine.sh, docs/engine.md.
ENGINE ?= auto
ENGINE_TOOLS := $(TOOLS)/engine
ENGINE_BIN := $(ENGINE_TOOLS)/bin
.PHONY: e2e-tools engine-tools device-tools node-tools gpu-node-carry e2e real-preview

engine-tools:
	ENGINE=$(ENGINE) bash e2e/select-engine.sh $(ENGINE_TOOLS)

e2e-tools: engine-tools
	bash e2e/build-tools.sh $(E2E_BIN)
	bash e2e/build-cluster.sh $(E2E_BIN)

# NVIDIA's GPU Feature Discovery and device plugin, and mini-kubelet, for a run on a machine with a GPU (never CI):
# docs/verification.md, "On a real GPU".
device-tools:
	bash e2e/build-device-tools.sh $(E2E_BIN)

# A whole GPU node (kubelet, control plane, containerd, runc, CNI, the NVIDIA Container Toolkit, the device plugin
# v0.20.0 from its tag in DP_SRC) and its carry for one call of the device tool: docs/verification.md, "On a real
# GPU: a real kubelet runs the program's pods".
NODE_BIN := $(TOOLS)/node/bin
node-tools:
	bash e2e/build-node-tools.sh $(NODE_BIN)

gpu-node-carry: node-tools $(DEV)
	bash e2e/gpunode/prepare-carry.sh $(NODE_BIN)

# The run's slowest tests, with each module's total, land in E2E_DURATIONS (tests/e2e/durations.py); .ci/run shows it.
E2E_DURATIONS := build/e2e-durations.txt
# pytest-xdist workers, as TEST_WORKERS: `auto` is one more than the cores. Each worker starts its own API servers,
# control planes and deployed stack; each xdist group (a module, or every test of the deployed stack) runs on one
# worker, in the order tests/e2e/conftest.py puts them (`--no-loadscope-reorder`). E2E_WORKERS=1 is the reference:
# one process, as before xdist.
E2E_WORKERS ?= auto
E2E_XDIST = $(if $(filter 0 1,$(E2E_WORKERS)),-n 0,-n $(E2E_WORKERS) --dist loadgroup --no-loadscope-reorder)
e2e: e2e-tools $(DEV)
	$(NO_ECHO_IF_SECRET)GPU_POOL_E2E=1 E2E_TOOLS_BIN=$(abspath $(E2E_BIN)) ENGINE_BIN=$$(cat $(ENGINE_TOOLS)/selected) \
	  E2E_DURATIONS_FILE=$(abspath $(E2E_DURATIONS)) $(UV) run --no-sync pytest $(E2E_XDIST) tests/e2e $(ARGS)

# `pulumi preview` of a real stack with your own backend and lab, with the engine built here when there is one:
# make real-preview STACK=mylab. It runs the program's host and cluster preflights (no GPU_POOL_OFFLINE), with
# e2e/preview.env's settings for a preview (never for `up`).
PREVIEW_ENV := $(shell grep -v '^\#' e2e/preview.env)
real-preview: $(RUNTIME)
	$(NO_ECHO_IF_SECRET)PATH="$(if $(wildcard $(ENGINE_BIN)/pulumi),$(abspath $(ENGINE_BIN)):)$(abspath $(TOOLS)/bin):$$PATH" \
	  $(PREVIEW_ENV) pulumi preview --stack $(STACK) --diff $(ARGS)
