"""JVM options of the Spark JVMs the tests start (executors' drivers, cluster executors).

A test's JVM lives seconds to a few minutes and does little work, most of it starting: the
JIT's second tier (C2) costs it CPU it never earns back. On this project's 2-core machine a
local SparkSession that writes and reads 20,000 rows took 14.4 and 16.5 CPU seconds as
Spark starts it, 8.9 and 10.5 with ``-XX:TieredStopAtLevel=1`` (the machine's busy ticks over
the run). The development broker, the Schema Registry and the OIDC provider run with the same
option (``dev/kafka/kafkactl.py``, ``dev/registry/registryctl.py``, ``support/oidc.py``).
Production executors keep the JVM's defaults: nothing in ``daemon/`` sets this.
"""

TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
