# The two commands: `make preview` (offline preview of a stack) and `make test`.
# On a fresh machine both bootstrap uv and the locked environment; only python3 and make are assumed.

UV_VERSION := 0.13.8
TOOLS := .tools
UV := $(TOOLS)/bin/uv
# uv must use this machine's python3, never download a Python build of its own.
export UV_PYTHON_DOWNLOADS := never
export UV_PYTHON := python3
# Compile the SDKs to bytecode once at install: where PYTHONDONTWRITEBYTECODE is set (as on CI), every
# Python process would otherwise recompile pulumi_kubernetes' sources (~3 s each).
export UV_COMPILE_BYTECODE := 1

STACK ?= prod
OUT ?= build/$(STACK)
ARGS ?=
# Contract tests read upstream reference data from here; CI sets it explicitly.
export GPU_POOL_UPSTREAM_DIR ?= $(wildcard $(abspath ../shared/upstream))

.PHONY: preview diff test lint bench clean

$(UV):
	python3 -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

.venv/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --locked
	@touch $@

preview: .venv/.synced
	$(UV) run --no-sync python -m offline.preview --stack $(STACK) --out $(OUT) $(ARGS)

# What a config change will do: make diff STACK=prod BEFORE=path/to/earlier/Pulumi.prod.yaml [AFTER=...]
BEFORE ?=
AFTER ?=
diff: .venv/.synced
	@test -n "$(BEFORE)" || { echo "make diff needs BEFORE=<an earlier Pulumi.$(STACK).yaml>, e.g. from git show HEAD~1:Pulumi.$(STACK).yaml" >&2; exit 2; }
	$(UV) run --no-sync python -m offline.diff --stack $(STACK) --before $(BEFORE) $(if $(AFTER),--after $(AFTER)) --out $(OUT) $(ARGS)

lint: .venv/.synced
	$(UV) run --no-sync ruff check .
	$(UV) run --no-sync ruff format --check .
	$(UV) run --no-sync mypy

test: lint
	$(UV) run --no-sync pytest

bench: .venv/.synced
	$(UV) run --no-sync python -m benchmarks.run

clean:
	rm -rf build .venv $(TOOLS)
