"""Build the SparkSession every Spark job uses: local[*] by default, any master by config."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from dgm.util.paths import user_cache_dir

SCALA_BINARY = "2.13"


def kafka_source_package() -> str:
    """The Spark Kafka source matching the installed PySpark, resolved from Maven Central."""
    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY}:{pyspark.__version__}"


def avro_package() -> str:
    """Spark's Avro functions (from_avro: the audit decodes registry-framed Avro records with
    them, spark_jobs/audit/registry_columns.py), of the installed PySpark's version."""
    return f"org.apache.spark:spark-avro_{SCALA_BINARY}:{pyspark.__version__}"


def ivy_settings() -> str:
    """Ivy settings that resolve only from Maven Central into dgm's cache.

    Spark's default chain also reads ~/.m2, where Maven often leaves a POM without its jar
    (`mvn dependency:get -Dtransitive=false`), and Ivy then fails the whole resolution.
    """
    cache = user_cache_dir() / "ivy"
    settings = cache / "ivysettings.xml"
    text = (
        "<ivysettings>\n"
        '  <settings defaultResolver="central"/>\n'
        f'  <caches defaultCacheDir="{cache / "cache"}"/>\n'
        '  <resolvers><ibiblio name="central" m2compatible="true"/></resolvers>\n'
        "</ivysettings>\n"
    )
    if not settings.exists() or settings.read_text() != text:
        cache.mkdir(parents=True, exist_ok=True)
        temporary = settings.with_suffix(".tmp")
        temporary.write_text(text)
        os.replace(temporary, settings)
    return str(settings)


KAFKA_CONSUMERS_KEPT = 4096  # idle ones still close after Spark's 5 minutes


def build_session(
    master: str | None = None,
    app_name: str = "dgm",
    shuffle_partitions: int | None = None,
    packages: Sequence[str] = (),
) -> SparkSession:
    """`packages`: more Maven coordinates to resolve beside the Kafka source, e.g. the JDBC
    drivers of the external sinks (spark_jobs.audit.external_jdbc.driver_packages)."""
    master = master or os.environ.get("DGM_SPARK_MASTER", "local[*]")
    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config(
            "spark.jars.packages", ",".join([kafka_source_package(), avro_package(), *packages])
        )
        # The Ivy cache lives beside dgm's other downloads so a warm start never re-fetches.
        .config("spark.jars.ivy", str(user_cache_dir() / "ivy"))
        .config("spark.jars.ivySettings", ivy_settings())
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or 2 * cores))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # The kept fingerprints are cached columns, scanned every cycle: uncompressed they
        # take twice the memory (~75 bytes a fingerprint) and half the time to load
        # (10M: 3.7 s against 6.7 s) and scan (bench/HISTORY.md,
        # "The rebuild within 3x DuckDB at 10M").
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        # The audit's consumers are reused from cycle to cycle (kafka_source.audit_group):
        # the pool must hold one per partition audited, not Spark's default 64, or it
        # closes them as fast as it opens them.
        .config("spark.kafka.consumer.cache.capacity", str(KAFKA_CONSUMERS_KEPT))
    )
    memory = os.environ.get("DGM_SPARK_DRIVER_MEMORY")
    if memory:
        # In local mode the driver's heap holds every executor's cache: 1g (Spark's default)
        # spills a 10M-fingerprint cache to disk. Read before the JVM starts, so env only.
        builder = builder.config("spark.driver.memory", memory)
    if master.startswith("local"):
        # Stay on loopback: nothing outside this machine needs to reach a local driver.
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
        # The Spark UI binds to SPARK_LOCAL_IP, else every interface: the JVM inherits this.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The driver is every executor here, and an analysis wants throughput, not short
        # pauses: Parallel GC took ~3 s off a warm 10M rebuild against G1, Java's default
        # (bench/HISTORY.md, "The rebuild at 10M: the driver's tail"). A collector chosen
        # in the environment wins (two make the JVM refuse to start).
        if not gc_chosen(os.environ):
            builder = builder.config("spark.driver.extraJavaOptions", "-XX:+UseParallelGC")
        use_this_python()
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    _quiet_stable_group_warning(session)
    if not master.startswith("local"):
        # Executors on other hosts run the engine's per-partition code (spark_jobs.analyze
        # per_id, per_session): ship it, so they need pyspark's own Python deps, not dgm.
        session.sparkContext.addPyFile(str(code_archive()))
    return session


# The variables every JVM reads its options from, beside its command line.
JAVA_OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")


def gc_chosen(env: Mapping[str, str]) -> bool:
    """Whether `env` already picks a garbage collector for the JVMs it starts."""
    return any(re.search(r"-XX:\+Use\w+GC\b", env.get(name, "")) for name in JAVA_OPTION_VARIABLES)


def _quiet_stable_group_warning(session: SparkSession) -> None:
    """The Kafka source warns at every read that sets `kafka.group.id`, against sharing a
    group between queries that subscribe; the audit's reads assign partitions and commit
    nothing (kafka_source.audit_group), so the warning would only fill the log."""
    jvm = session.sparkContext._jvm
    assert jvm is not None
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.kafka010.KafkaSourceProvider",
        jvm.org.apache.logging.log4j.Level.ERROR,
    )


def running_session() -> SparkSession | None:
    """The session of a SparkContext already running in this process, whichever thread
    started it, else None. A caller that finds one must not stop it: it is somebody else's
    (SparkSession.getActiveSession() is per thread and misses a session another thread used
    last, so it cannot tell)."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:
        return None
    return SparkSession.builder.getOrCreate()


def use_this_python() -> None:
    """Local mode: Spark's Python workers run this interpreter, the one with dgm's numpy,
    pandas and pyarrow, whatever `python3` PATH finds first (pyspark's default). Unless the
    user chose one: PYSPARK_PYTHON set (pyspark reads it when the SparkContext starts).

    On a cluster the executors run their own `python3` (or the PYSPARK_PYTHON the driver
    was started with): the same Python minor version with the same packages
    (docs/operations.md, "Spark executors' Python")."""
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable


def code_archive() -> Path:
    """A zip of the dgm and spark_jobs packages' Python files, named by their content."""
    root = Path(__file__).resolve().parents[1]
    files = sorted(p for package in ("dgm", "spark_jobs") for p in (root / package).rglob("*.py"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    archive = user_cache_dir() / "pyfiles" / f"dgm-{digest.hexdigest()[:16]}.zip"
    if not archive.exists():
        archive.parent.mkdir(parents=True, exist_ok=True)
        temporary = archive.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(temporary, "w") as bundle:
            for path in files:
                bundle.write(path, path.relative_to(root))
        os.replace(temporary, archive)
    return archive
