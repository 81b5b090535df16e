# Every set-up step lives here, so that a fresh clone needs only `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lint test proto demo bench bench-decode bench-e2e bench-scaling bench-commit check-java clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# PySpark needs a JVM; say what to install rather than failing deep inside Spark.
check-java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "error: 'java' not found. PySpark needs Java 17:"; \
	  echo "  Debian/Ubuntu: apt-get install -y openjdk-17-jre-headless"; \
	  echo "  RHEL/Fedora:   dnf install -y java-17-openjdk-headless"; \
	  exit 1; }

# Style and types, on the product and on the tests and benchmarks that drive it.
lint: venv
	$(VENV)/bin/ruff check canalbridge spark_sink tests bench
	$(VENV)/bin/mypy

test: venv check-java lint
	$(PY) -m pytest $(PYTEST_ARGS)

proto: venv
	$(PY) -m canalbridge.protocol.generate

demo: venv check-java
	$(VENV)/bin/canalbridge demo

# Benchmarks print their figures as a final JSON line (README, "Performance").
bench-decode: venv
	$(PY) -m bench.decode $(BENCH_ARGS)

bench-e2e: venv check-java
	$(PY) -m bench.end_to_end $(BENCH_ARGS)

bench-scaling: venv check-java
	$(PY) -m bench.scaling $(BENCH_ARGS)

bench-commit: venv check-java
	$(PY) -m bench.commit_latency $(BENCH_ARGS)

bench: bench-decode bench-e2e bench-scaling bench-commit

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
