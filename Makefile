# Every set-up step lives here, so that a fresh clone needs only `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lint config-reference docs prose check test proto demo dist demo-real bench bench-decode bench-e2e bench-scaling bench-commit bench-target-size bench-sustained bench-real bench-kafka bench-snapshot bench-cluster bench-peers \
	check-java clean \
	check-maven canal-jars kafka-jars iceberg-jar jdbc-driver cluster-jars rest-catalog nessie flink-peer decoder-jar mariadb-server prometheus real-stack \
	clean-cache

# Artifacts fetched at set-up time into a git-ignored cache that `make clean`
# keeps (docs/development/real-stack.md#artifacts). Maven's local repository lives there too,
# so a fresh clone needs nothing from ~/.m2.
CACHE ?= .cache
MVN = mvn -B -q -ntp -Dstyle.color=never -s deploy/maven/settings.xml -Dmaven.repo.local=$(abspath $(CACHE))/m2
CANAL_VERSION := 1.1.7
CANAL_HOME := $(CACHE)/canal-$(CANAL_VERSION)
CANAL_STAMP := $(CANAL_HOME)/.complete
CANAL_LAUNCHER := $(wildcard deploy/maven/canal/launcher/*.java deploy/maven/canal/launcher/*.xml)
CANAL_LAUNCHER_STAMP := $(CANAL_HOME)/launcher/.complete
KAFKA_VERSION := 3.9.1
KAFKA_HOME := $(CACHE)/kafka-$(KAFKA_VERSION)
KAFKA_STAMP := $(KAFKA_HOME)/.complete
ICEBERG_VERSION := 1.11.0
ICEBERG_JAR := $(CACHE)/iceberg/iceberg-spark-runtime-3.5_2.12-$(ICEBERG_VERSION).jar
JDBC_VERSION := 3.5.7
JDBC_JAR := $(CACHE)/jdbc/mariadb-java-client-$(JDBC_VERSION).jar
S3PROXY_VERSION := 2.7.0
CLUSTER_STAMP := $(CACHE)/cluster/.complete
FLINK_PEER_HOME := $(CACHE)/flink-cdc-peer
FLINK_PEER_STAMP := $(FLINK_PEER_HOME)/.complete
FLINK_PEER_HARNESS := deploy/maven/flink/harness/FlinkCdcPeer.java
REST_HOME := $(CACHE)/rest-catalog
REST_STAMP := $(REST_HOME)/.complete
REST_LAUNCHER := deploy/maven/rest/launcher/CanalBridgeRestCatalog.java
NESSIE_VERSION := 0.99.0
NESSIE_HOME := $(CACHE)/nessie-$(NESSIE_VERSION)
NESSIE_STAMP := $(NESSIE_HOME)/.complete
DECODER_JAR := $(CACHE)/decoder/canalbridge-decoder.jar
DECODER_SOURCES := spark_sink/decoder/pom.xml $(wildcard spark_sink/decoder/src/main/java/canalbridge/spark/*.java) \
	proto/EntryProtocol.proto
PROTOC_CLASSIFIER := linux-$(subst aarch64,aarch_64,$(shell uname -m))

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

# Maven and a JDK (javac) fetch and build the Canal server for the real-stack tests.
check-maven: check-java
	@command -v mvn >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || { \
	  echo "error: 'mvn' and 'javac' are needed to fetch the real-stack artifacts from Maven Central:"; \
	  echo "  Debian/Ubuntu: apt-get install -y maven openjdk-17-jdk-headless"; \
	  exit 1; }

# Canal's server modules and their runtime dependencies (deploy/maven/canal/pom.xml
# says why 1.1.7), then our launcher compiled against them, with its SQL maps
# beside its classes. Each built aside and moved into place, so an interrupted
# fetch never looks complete; a change to the launcher recompiles only it.
$(CANAL_STAMP): deploy/maven/canal/pom.xml deploy/maven/settings.xml
	@$(MAKE) --no-print-directory check-maven
	@echo "fetching Canal $(CANAL_VERSION) server jars from Maven Central into $(CANAL_HOME)"
	rm -rf $(CANAL_HOME).tmp
	$(MVN) -f deploy/maven/canal/pom.xml -Dcanal.lib.dir=$(abspath $(CANAL_HOME).tmp)/lib \
	  -Dcanal.plugin.dir=$(abspath $(CANAL_HOME).tmp)/plugin validate
	rm -rf $(CANAL_HOME) && mv $(CANAL_HOME).tmp $(CANAL_HOME)
	touch $@

$(CANAL_LAUNCHER_STAMP): $(CANAL_STAMP) $(CANAL_LAUNCHER)
	rm -rf $(CANAL_HOME)/launcher.tmp
	javac -nowarn -encoding UTF-8 -d $(CANAL_HOME)/launcher.tmp -cp '$(CANAL_HOME)/lib/*' \
	  $(filter %.java,$(CANAL_LAUNCHER))
	cp $(filter %.xml,$(CANAL_LAUNCHER)) $(CANAL_HOME)/launcher.tmp/canalbridge/devkit/
	rm -rf $(CANAL_HOME)/launcher && mv $(CANAL_HOME)/launcher.tmp $(CANAL_HOME)/launcher
	touch $@

canal-jars: $(CANAL_LAUNCHER_STAMP)

# A Kafka broker (KRaft) and its runtime dependencies, for Canal's Kafka mode.
$(KAFKA_STAMP): deploy/maven/kafka/pom.xml deploy/maven/settings.xml
	@$(MAKE) --no-print-directory check-maven
	@echo "fetching the Kafka $(KAFKA_VERSION) broker jars from Maven Central into $(KAFKA_HOME)"
	rm -rf $(KAFKA_HOME).tmp
	$(MVN) -f deploy/maven/kafka/pom.xml -Dkafka.version=$(KAFKA_VERSION) -Dkafka.lib.dir=$(abspath $(KAFKA_HOME).tmp)/lib validate
	rm -rf $(KAFKA_HOME) && mv $(KAFKA_HOME).tmp $(KAFKA_HOME)
	touch $@

kafka-jars: $(KAFKA_STAMP)

# The official Iceberg runtime for Spark 3.5 / Scala 2.12 (a single shaded jar).
$(ICEBERG_JAR): deploy/maven/iceberg/pom.xml deploy/maven/settings.xml
	@$(MAKE) --no-print-directory check-maven
	@echo "fetching $(notdir $@) from Maven Central"
	rm -rf $(CACHE)/iceberg.tmp
	$(MVN) -f deploy/maven/iceberg/pom.xml -Diceberg.version=$(ICEBERG_VERSION) \
	  -Diceberg.lib.dir=$(abspath $(CACHE))/iceberg.tmp validate
	mkdir -p $(dir $@) && mv $(CACHE)/iceberg.tmp/$(notdir $@) $@ && rm -rf $(CACHE)/iceberg.tmp

iceberg-jar: $(ICEBERG_JAR)

# The JDBC driver a snapshot's Spark reads the source's tables with (spark_sink/session.py adds it).
$(JDBC_JAR): deploy/maven/jdbc/pom.xml deploy/maven/settings.xml
	@$(MAKE) --no-print-directory check-maven
	@echo "fetching $(notdir $@) from Maven Central"
	rm -rf $(CACHE)/jdbc.tmp
	$(MVN) -f deploy/maven/jdbc/pom.xml -Djdbc.version=$(JDBC_VERSION) -Djdbc.lib.dir=$(abspath $(CACHE))/jdbc.tmp validate
	mkdir -p $(dir $@) && mv $(CACHE)/jdbc.tmp/$(notdir $@) $@ && rm -rf $(CACHE)/jdbc.tmp

jdbc-driver: $(JDBC_JAR)

# Iceberg's AWS bundle (S3FileIO; spark_sink/session.py adds it) and S3Proxy, the S3-compatible
# store the cluster tests run (deploy/maven/cluster/pom.xml).
$(CLUSTER_STAMP): deploy/maven/cluster/pom.xml deploy/maven/settings.xml
	@$(MAKE) --no-print-directory check-maven
	@echo "fetching iceberg-aws-bundle $(ICEBERG_VERSION) and s3proxy $(S3PROXY_VERSION) from Maven Central"
	rm -rf $(CACHE)/cluster.tmp
	$(MVN) -f deploy/maven/cluster/pom.xml -Diceberg.version=$(ICEBERG_VERSION) -Ds3proxy.version=$(S3PROXY_VERSION) \
	  -Dcluster.lib.dir=$(abspath $(CACHE))/cluster.tmp validate
	rm -rf $(CACHE)/cluster && mv $(CACHE)/cluster.tmp $(CACHE)/cluster
	touch $@

cluster-jars: $(CLUSTER_STAMP)

# Flink CDC into Iceberg's Flink sink, the peer of `make bench-peers` (deploy/maven/flink/pom.xml),
# and its harness compiled against them. Built aside and moved into place, as Canal is.
$(FLINK_PEER_STAMP): deploy/maven/flink/pom.xml deploy/maven/settings.xml $(FLINK_PEER_HARNESS)
	@$(MAKE) --no-print-directory check-maven
	@echo "fetching Flink CDC, Flink and Iceberg's Flink runtime from Maven Central into $(FLINK_PEER_HOME) (227 MB)"
	rm -rf $(FLINK_PEER_HOME).tmp
	$(MVN) -f deploy/maven/flink/pom.xml -Dflink.lib.dir=$(abspath $(FLINK_PEER_HOME).tmp)/lib validate
	javac -nowarn -encoding UTF-8 -d $(FLINK_PEER_HOME).tmp/harness -cp '$(FLINK_PEER_HOME).tmp/lib/*' $(FLINK_PEER_HARNESS)
	rm -rf $(FLINK_PEER_HOME) && mv $(FLINK_PEER_HOME).tmp $(FLINK_PEER_HOME)
	touch $@

flink-peer: $(FLINK_PEER_STAMP)

# An Iceberg REST catalog server for the tests (deploy/maven/rest/pom.xml says what and why), and our
# launcher compiled against it. Built aside and moved into place, as Canal is.
$(REST_STAMP): deploy/maven/rest/pom.xml deploy/maven/settings.xml $(REST_LAUNCHER)
	@$(MAKE) --no-print-directory check-maven
	@echo "fetching an Iceberg $(ICEBERG_VERSION) REST catalog server from Maven Central into $(REST_HOME) (45 MB)"
	rm -rf $(REST_HOME).tmp
	$(MVN) -f deploy/maven/rest/pom.xml -Diceberg.version=$(ICEBERG_VERSION) -Drest.lib.dir=$(abspath $(REST_HOME).tmp)/lib validate
	javac -nowarn -encoding UTF-8 -d $(REST_HOME).tmp/launcher -cp '$(REST_HOME).tmp/lib/*' $(REST_LAUNCHER)
	rm -rf $(REST_HOME) && mv $(REST_HOME).tmp $(REST_HOME)
	touch $@

rest-catalog: $(REST_STAMP)

# Project Nessie's server, whose Iceberg REST catalog commits several tables at once; the tests run it with a
# Java 21 or newer (tests/infra/artifacts.py finds one).
$(NESSIE_STAMP): deploy/maven/nessie/pom.xml deploy/maven/settings.xml | $(STAMP)
	@$(MAKE) --no-print-directory check-maven
	@PYTHONPATH=. $(PY) -c 'from tests.infra.artifacts import newer_java_binary; newer_java_binary()' 2>/dev/null || { \
	  echo "error: Nessie's server (the tests' multi-table REST catalog) needs a JDK 21 or newer, beside Java 17:"; \
	  echo "  install one under /usr/lib/jvm (Eclipse Temurin's packages; openjdk-21-jdk-headless where the distribution has it),"; \
	  echo "  or set CANALBRIDGE_JAVA_HOME to one"; \
	  exit 1; }
	@echo "fetching the Nessie $(NESSIE_VERSION) catalog server from Maven Central into $(NESSIE_HOME) (239 MB)"
	rm -rf $(NESSIE_HOME).tmp
	$(MVN) -f deploy/maven/nessie/pom.xml -Dnessie.version=$(NESSIE_VERSION) -Dnessie.lib.dir=$(abspath $(NESSIE_HOME).tmp) validate
	rm -rf $(NESSIE_HOME) && mv $(NESSIE_HOME).tmp $(NESSIE_HOME)
	touch $@

nessie: $(NESSIE_STAMP)

# The JVM decoder of Canal's RowChange (spark_sink/decode.py): protoc from Maven Central
# turns proto/ into Java, and Maven builds it with RowChangeDecoder into one shaded jar.
$(DECODER_JAR): $(DECODER_SOURCES) deploy/maven/settings.xml $(STAMP)
	@$(MAKE) --no-print-directory check-maven
	@echo "building $(notdir $@) (protoc and protobuf-java from Maven Central)"
	rm -rf $(CACHE)/decoder.tmp && mkdir -p $(CACHE)/decoder.tmp/generated
	$(MVN) -f spark_sink/decoder/pom.xml -Dprotoc.classifier=$(PROTOC_CLASSIFIER) \
	  -Ddecoder.out=$(abspath $(CACHE))/decoder.tmp/build validate
	chmod +x $(CACHE)/decoder.tmp/build/protoc
	$(CACHE)/decoder.tmp/build/protoc --proto_path=proto --java_out=$(CACHE)/decoder.tmp/generated proto/EntryProtocol.proto
	$(MVN) -f spark_sink/decoder/pom.xml -Dprotoc.classifier=$(PROTOC_CLASSIFIER) $$($(PY) -m spark_sink.decode) \
	  -Ddecoder.out=$(abspath $(CACHE))/decoder.tmp/build -Ddecoder.generated=$(abspath $(CACHE))/decoder.tmp/generated package
	mkdir -p $(dir $@) && mv $(CACHE)/decoder.tmp/build/$(notdir $@) $@ && rm -rf $(CACHE)/decoder.tmp

decoder-jar: $(DECODER_JAR)

# What a user installs: a wheel and an sdist in dist/, each carrying the decoder jar (setup.py), built
# with the virtualenv's setuptools (no download). docs/guide/deployment.md#install says how to install them.
dist: $(DECODER_JAR) $(STAMP)
	rm -rf build dist
	$(PY) -m build --no-isolation --outdir dist .
	@ls -l dist

# MariaDB's binaries (Debian's mariadb-server, installed when missing and root), and openssl, which makes
# the certificates of its TLS; the tests run a private instance, never the machine's service.
mariadb-server:
	@sh deploy/dev/install-debian.sh "mariadbd mariadb-install-db openssl" "mariadb-server openssl" \
	  "the real-stack tests run MariaDB 10.11 or newer"

# Prometheus and promtool (Debian's prometheus): the alert rules' tests, and the monitoring test's private server.
prometheus:
	@sh deploy/dev/install-debian.sh "prometheus promtool" "prometheus" \
	  "the tests of deploy/prometheus and deploy/grafana run them"

real-stack: canal-jars kafka-jars iceberg-jar jdbc-driver cluster-jars rest-catalog nessie mariadb-server prometheus

# Style and types, on the product and on the tests and benchmarks that drive it.
lint: venv
	$(VENV)/bin/ruff check canalbridge spark_sink tests bench
	$(VENV)/bin/mypy

# docs/reference/configuration.md, from the settings' declarations (a test fails when it is stale).
config-reference: venv
	$(PY) -m canalbridge.daemon.config_reference --write

# The documentation site (docs/, mkdocs.yml) into site/; --strict fails on a broken link or anchor.
docs: venv
	$(VENV)/bin/mkdocs build --strict --quiet

# The prose: markdownlint's rules (pymarkdown) and spelling (codespell), configured in pyproject.toml;
# the manual's own rules (no lab notes on user pages) are tests/unit/test_docs_prose.py.
PROSE = README.md CHANGELOG.md docs deploy/README.md
prose: venv
	$(VENV)/bin/pymarkdown --config pyproject.toml scan -r $(PROSE)
	$(VENV)/bin/codespell --toml pyproject.toml $(PROSE)

# Two pytest-xdist workers, a file at a time each, in the order tests/conftest.py gives (the slowest
# directories first): a file's services and module fixtures stay in one process, and one worker's waits
# (commit intervals, broker timeouts) leave its core to the other (docs/development/tests.md#time).
# TEST_WORKERS=0 runs everything in this one process.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test: venv check-java real-stack flink-peer decoder-jar lint docs prose
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The inner loop, in under 3 minutes: style, types, this site, and every test that starts no JVM. The
# Iceberg jar is fetched, not run: the config tests build the Spark conf, which names it; promtool tests
# the alert rules.
CHECK_TESTS = tests/unit tests/integration/sync tests/integration/canal tests/integration/protocol \
	tests/integration/daemon tests/integration/cli

check: lint docs prose iceberg-jar prometheus
	$(PY) -m pytest $(XDIST) $(CHECK_TESTS) $(PYTEST_ARGS)

proto: venv
	$(PY) -m canalbridge.protocol.generate

# Everything the demo's daemon uses: the Iceberg runtime, and the JVM decoder its default (auto) picks.
demo: venv check-java iceberg-jar decoder-jar
	$(VENV)/bin/canalbridge demo

# The same against a private MariaDB and a real Canal server, verified against MariaDB.
demo-real: venv check-java real-stack decoder-jar
	$(VENV)/bin/python -m tests.infra.demo_real

# Benchmarks print their figures as a final JSON line (docs/performance.md).
bench-decode: venv check-java iceberg-jar decoder-jar
	$(PY) -m bench.decode $(BENCH_ARGS)

bench-e2e: venv check-java decoder-jar
	$(PY) -m bench.end_to_end $(BENCH_ARGS)

bench-scaling: venv check-java
	$(PY) -m bench.scaling $(BENCH_ARGS)

bench-commit: venv check-java
	$(PY) -m bench.commit_latency $(BENCH_ARGS)

bench-target-size: venv check-java decoder-jar
	$(PY) -m bench.target_size $(BENCH_ARGS)

# 10M row changes with table maintenance on: does the last tenth keep the first tenth's pace?
bench-sustained: venv check-java decoder-jar
	$(PY) -m bench.sustained $(or $(BENCH_ARGS),--canal-store 262144 --min-mb 128 --max-mb 256)

# MariaDB through the real Canal server into Iceberg, beside the dev-server figure.
bench-real: venv check-java real-stack decoder-jar
	$(PY) -m bench.real_stack $(BENCH_ARGS)

# Canal's Kafka mode: a Kafka 3.9 broker's topic (both record formats) into Iceberg.
bench-kafka: venv check-java kafka-jars decoder-jar
	$(PY) -m bench.kafka $(BENCH_ARGS)

# Initial load: a table already in MariaDB snapshotted into Iceberg, beside the mariadb client's own read.
bench-snapshot: venv check-java real-stack decoder-jar
	$(PY) -m bench.snapshot $(BENCH_ARGS)

# The end-to-end backlog run again on a two-worker Spark standalone cluster into S3 through a JDBC catalog.
bench-cluster: venv check-java real-stack decoder-jar
	$(PY) -m bench.end_to_end --cluster $(or $(BENCH_ARGS),--rows 1000000)

# Flink CDC and canalbridge side by side, each replaying the same MariaDB binlog into Iceberg.
bench-peers: venv check-java real-stack decoder-jar flink-peer
	$(PY) -m bench.peers $(BENCH_ARGS)

bench: bench-decode bench-e2e bench-scaling bench-commit bench-target-size bench-sustained bench-real bench-kafka \
	bench-snapshot bench-cluster bench-peers

# Keeps $(CACHE) (fetched jars, Maven's repository): `make clean-cache` drops it.
clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache deploy/maven/*/target

clean-cache:
	rm -rf $(CACHE)
