# connectd — one command per habit. CI calls these same targets (.ci/run → make test).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
KAFKA_PORT ?= 9092
REST_PORT ?= 8083
KAFKA_VERSION ?= 4.1.2
SPARK_MASTER_PORT ?= 7077
SPARK_MASTER_WEBUI_PORT ?= 8080
SPARK_WORKERS ?= 2
BENCH_SPARK_PORT ?= 17270
BENCH_SPARK_WEBUI_PORT ?= 18270
SPARK_MASTER ?=
REGISTRY_PORT ?= 8081
PYTEST_ARGS ?=
comma := ,
# make test runs the suite in two pytest worker processes (pytest-xdist), a test file per worker
# at a time: most tests wait on a broker, a JVM or a deadline, and one process left half of the
# machine's two cores idle. Each worker has its own broker and Spark pools (session fixtures).
# TEST_WORKERS=0 runs it in one process. Files go longest first (tests/support/ordering.py, by
# tests/durations.json); each run records its own durations in .cache/test-durations.json.
TEST_WORKERS ?= 2

export KAFKA_VERSION

.PHONY: spark-venv help venv check-java check-test-tools jars prometheus registry registry-up registry-down kafka-up kafka-down spark-up spark-down lint fmt test test-spark test-unit test-integration soak bench bench-avro-decode bench-commitlog bench-executor bench-e2e bench-rest bench-many bench-cluster bench-ss bench-spark-cluster bench-spark-lines demo demo-down clean

help:
	@echo "make demo        run connectd on the example configs against a local broker"
	@echo "                 (REST on 127.0.0.1:REST_PORT, default 8083; broker on KAFKA_PORT)"
	@echo "make test        lint, then unit and integration tests (starts its own broker)"
	@echo "make test-spark SPARK=3.5  the compatibility suite on another Spark line (3.5, 4.0,"
	@echo "                 4.1) in a venv of its own, .venv-spark35 etc. (README \"Spark lines\")"
	@echo "make lint        ruff format --check, ruff check, mypy --strict, the layer rule (dev/check_layers.py)"
	@echo "make jars        fetch the Delta Lake and Iceberg jars from Maven Central into"
	@echo "                 ~/.cache/connectd/jars (connectd fetch-jars; make test does it too)"
	@echo "make prometheus  Debian's Prometheus package, unpacked into .cache/prometheus (the alert"
	@echo "                 rules' tests run it; make test does it too)"
	@echo "make kafka-up    start the development broker (KAFKA_PORT, default 9092)"
	@echo "make registry-up a Confluent-compatible Schema Registry (Apicurio, from Maven Central) on"
	@echo "                 127.0.0.1:REGISTRY_PORT (default 8081); prints schema.registry.url"
	@echo "make registry-down  stop it"
	@echo "make kafka-down  stop it"
	@echo "make spark-up    a Spark standalone master and SPARK_WORKERS workers on loopback, from"
	@echo "                 the jars of the pyspark of line SPARK, default 4.1 (SPARK=3.5: its"
	@echo "                 venv's); spark://127.0.0.1:SPARK_MASTER_PORT, default 7077; status"
	@echo "                 JSON on http://127.0.0.1:SPARK_MASTER_WEBUI_PORT/json/, default 8080"
	@echo "make spark-down  stop it and every executor it runs"
	@echo "make bench       benchmarks (bench/; QUICK=1 for a short run); make soak: long runs"
	@echo "make bench-cluster  distributed mode against real Kafka Connect 4.1 (bench/README.md)"
	@echo "make bench-ss    connectd against Spark Structured Streaming, same data (bench/README.md;"
	@echo "                 SPARK_MASTER=spark://... runs both sides on a Spark cluster)"
	@echo "make bench-spark-cluster  executors on a Spark standalone cluster against local[2]"

# The venv is rebuilt when pyproject.toml changes.
$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "connectd needs Python 3.11 or newer; found " + sys.version.split()[0])'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

check-java: $(STAMP)
	@$(PY) -c 'from daemon.javacheck import find_java; j = find_java(); print(f"java {j.version} at {j.executable}")'
	@command -v mvn >/dev/null || { echo "Maven is needed to fetch the Kafka broker jars: apt-get install maven" >&2; exit 69; }

# The table formats' jars (Delta Lake, Iceberg) in the default executor.jars.dir; present jars
# are skipped, so this costs nothing once done.
jars: check-java
	@$(PY) -m daemon fetch-jars

# Debian's Prometheus package (prometheus and promtool), unpacked into the project's .cache: the
# monitoring tests run it on loopback, tracked by PID. Nothing is installed system-wide and no
# service starts; apt-get refreshes its lists (as root) only if the download needs them.
PROMETHEUS_DIR := .cache/prometheus
PROMETHEUS := $(PROMETHEUS_DIR)/usr/bin/prometheus
prometheus: $(PROMETHEUS)
$(PROMETHEUS):
	@mkdir -p $(PROMETHEUS_DIR)/deb
	@cd $(PROMETHEUS_DIR)/deb && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus; } || { echo "Could not download Debian's prometheus package with apt-get" >&2; exit 69; }; }
	dpkg-deb -x "$$(ls $(PROMETHEUS_DIR)/deb/prometheus_*.deb | head -1)" $(PROMETHEUS_DIR)
	@$(PROMETHEUS) --version 2>&1 | head -1

# Tools the tests call besides Python and Java; under CI a test that cannot run fails the run
# (tests/conftest.py), so say what is missing before the long run starts.
check-test-tools:
	@command -v systemd-analyze >/dev/null || { echo "The unit-file tests need systemd-analyze: apt-get install systemd" >&2; exit 69; }
	@command -v mvn >/dev/null || { echo "The transform conformance tests resolve Kafka Connect's jars with Maven: apt-get install maven" >&2; exit 69; }

# A real Confluent-compatible Schema Registry (Apicurio Registry 2.6.13, Confluent's REST API)
# for the Avro converter's tests and for trying it by hand: fetched once from Maven Central
# into ~/.m2 and unpacked into .cache/registry (dev/registry/registryctl.py).
registry: check-java
	@$(PY) dev/registry/registryctl.py install

registry-up: registry
	@$(PY) dev/registry/registryctl.py up --port $(REGISTRY_PORT)

registry-down:
	@$(PYTHON) dev/registry/registryctl.py down --port $(REGISTRY_PORT)

kafka-up: check-java
	@$(PY) dev/kafka/kafkactl.py up --port $(KAFKA_PORT)

kafka-down:
	@$(PYTHON) dev/kafka/kafkactl.py down --port $(KAFKA_PORT)

# A real Spark standalone cluster for running executors against (README "Running on a Spark
# cluster"): Spark's own Master and Worker classes from the pyspark of line SPARK (default 4.1,
# the project's venv; SPARK=3.5 or 4.0: make test-spark's venv of that line); logs in .cache/spark.
spark-up: check-java spark-venv
	@$(SPARK_VENV)/bin/python dev/spark/sparkctl.py up --port $(SPARK_MASTER_PORT) --ui-port $(SPARK_MASTER_WEBUI_PORT) --workers $(SPARK_WORKERS)

spark-down:
	@$(PYTHON) dev/spark/sparkctl.py down --port $(SPARK_MASTER_PORT)

lint: $(STAMP)
	$(VENV)/bin/ruff format --check daemon tests bench dev
	$(VENV)/bin/ruff check daemon tests bench dev
	$(VENV)/bin/mypy
	$(PY) dev/check_layers.py

fmt: $(STAMP)
	$(VENV)/bin/ruff format daemon tests bench dev
	$(VENV)/bin/ruff check --fix daemon tests bench dev

test: lint check-java check-test-tools jars prometheus registry
	CONNECTD_TEST_DURATIONS_OUT=$(CURDIR)/.cache/test-durations.json $(VENV)/bin/pytest -m "not soak and not cross_line" --durations=40 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The compatibility suite (tests marked spark_line) on one Spark line: SPARK=3.5, 4.0 or 4.1.
# Each line gets a venv of its own with connectd and that line's pyspark (the pip extra
# spark35/spark40/spark41), and the table formats' builds for it; the default line (4.1) runs it
# in the project's venv. Rebuilt when pyproject.toml changes.
SPARK ?= 4.1
SPARK_LINES := 3.5 4.0 4.1
SPARK_EXTRA = spark$(subst .,,$(SPARK))
SPARK_VENV = $(if $(filter 4.1,$(SPARK)),$(VENV),.venv-$(SPARK_EXTRA))
SPARK_STAMP = $(SPARK_VENV)/.installed-$(SPARK_EXTRA)

ifeq ($(SPARK),4.1)
$(SPARK_STAMP): $(STAMP)
	@touch $@
else
$(SPARK_STAMP): pyproject.toml
	$(PYTHON) -m venv $(SPARK_VENV)
	$(SPARK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SPARK_VENV)/bin/python -m pip install --quiet -e '.[dev,$(SPARK_EXTRA)]'
	@touch $@
endif

spark-venv:
	@$(if $(filter $(SPARK),$(SPARK_LINES)),true,{ echo "SPARK=$(SPARK): expected one of $(SPARK_LINES)" >&2; exit 2; })
	@$(MAKE) --no-print-directory $(SPARK_STAMP)

test-spark: check-java check-test-tools spark-venv
	@$(SPARK_VENV)/bin/python -c 'import pyspark; print("pyspark", pyspark.__version__, "in $(SPARK_VENV)")'
	$(SPARK_VENV)/bin/python -m daemon fetch-jars
	$(SPARK_VENV)/bin/pytest -m "(spark_line or cross_line) and not soak" --durations=20 $(PYTEST_ARGS)

test-unit: $(STAMP) check-test-tools
	$(VENV)/bin/pytest tests/unit $(PYTEST_ARGS)

test-integration: check-java jars
	$(VENV)/bin/pytest -m "integration and not soak" $(PYTEST_ARGS)

soak: check-java
	$(VENV)/bin/pytest -m soak --timeout 5400 $(PYTEST_ARGS)

bench: bench-commitlog bench-executor bench-e2e bench-rest bench-many bench-avro-decode

bench-commitlog: $(STAMP)
	$(PY) bench/commitlog_bench.py $(if $(QUICK),--quick,)

# Avro decoding (column by column, fastavro) against the JSON path, per record: no broker.
bench-avro-decode: $(STAMP)
	$(PY) bench/avro_decode_bench.py $(if $(QUICK),--records 20000 --runs 3,)

bench-executor: check-java
	$(PY) bench/executor_bench.py $(if $(QUICK),--quick,)

bench-e2e: kafka-up
	$(PY) bench/e2e_bench.py --bootstrap 127.0.0.1:$(KAFKA_PORT) $(if $(QUICK),--records 100000 --runs 1,)

bench-rest: kafka-up
	@command -v wrk >/dev/null || { echo "bench-rest needs wrk: apt-get install wrk" >&2; exit 69; }
	$(PY) bench/rest_status_bench.py --bootstrap 127.0.0.1:$(KAFKA_PORT)

# One worker carrying 1, 20 and 100 ParquetSink connectors (2 tasks each): memory of the whole
# process tree and the time for 100 records per topic to reach every table; 20 also with
# write.engine=spark, the peer. QUICK=1: 1 and 20 only.
bench-many: kafka-up
	$(PY) bench/many_connectors_bench.py --bootstrap 127.0.0.1:$(KAFKA_PORT) $(if $(QUICK),--counts 1$(comma)20 --rounds 2,)

# connectd against Spark Structured Streaming on the same topics (Spark's Kafka source jars from
# Maven Central, cached in .cache/spark-sql-kafka-*/jars); 1M records x 3 runs, QUICK=1: 200k x 1.
# Not part of `make bench`: it needs Maven and takes ~20 minutes here (bench/README.md).
bench-ss: kafka-up
	$(PY) bench/ss_bench.py --bootstrap 127.0.0.1:$(KAFKA_PORT) $(if $(QUICK),--records 200000 --runs 1,) $(if $(SPARK_MASTER),--spark-master $(SPARK_MASTER),)

# Executors on a Spark standalone cluster (its own, from sparkctl, on BENCH_SPARK_PORT) against
# local[2]: executor start, a 50k-record write, kill -> application gone (bench/README.md).
bench-spark-cluster: check-java
	$(PY) bench/spark_cluster_bench.py --port $(BENCH_SPARK_PORT) --ui-port $(BENCH_SPARK_WEBUI_PORT) $(if $(QUICK),--quick,)

# Each Spark line side by side: executor start, a 50k-record write, the 1M-record JSON run
# (connectd only), each line in make test-spark's venv (bench/README.md). QUICK=1: one run each.
bench-spark-lines: kafka-up
	@for line in $(SPARK_LINES); do $(MAKE) --no-print-directory spark-venv SPARK=$$line || exit 1; done
	$(PY) bench/spark_lines_bench.py --bootstrap 127.0.0.1:$(KAFKA_PORT) $(if $(QUICK),--quick,)

# Three Kafka Connect 4.1 workers (jars from Maven Central, cached in .cache/connect-*/libs)
# against three connectd workers on the same broker; about 25 minutes, 6 with QUICK=1.
# Not part of `make bench`: it needs Maven and runs six JVM-backed workers at once.
bench-cluster: kafka-up
	$(PY) bench/cluster_bench.py --bootstrap 127.0.0.1:$(KAFKA_PORT) $(if $(QUICK),--quick,)

demo: kafka-up
	@$(PY) dev/demo.py --bootstrap 127.0.0.1:$(KAFKA_PORT) --rest-port $(REST_PORT)

demo-down: kafka-down

clean: kafka-down spark-down registry-down
	rm -rf .cache/kafka/run-* .cache/registry/run-* .state .demo
