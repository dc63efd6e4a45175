"""`dgm check`: can dgm do its work here? One line per check, ✓ or ✗ with the fix; exit 0/1.

It connects with each of dgm's three Kafka clients (confluent-kafka, kafka-python, Spark's
Java client) using the one [cluster.client], finds the pipelines' topics and groups, tries
each permission of the ACL table (dgm.clients.permissions, docs/configuration.md) with the call that
needs it, says which capabilities the brokers' API versions lack (dgm.clients.capabilities: a
gap is a `!`, not a failure), and checks the Spark master, the executors' Python and the state
directory.
"""

from __future__ import annotations

import argparse
import logging
import platform
import socket
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from collectors import access
from collectors.api_versions import ask_capabilities
from collectors.clients import Clients, ClusterUnreachable, check_bootstrap
from dgm.clients.capabilities import OPEN_TRANSACTIONS, PRODUCERS, ClusterCapabilities
from dgm.clients.kafka_python import scrub
from dgm.clients.permissions import (
    CLUSTER_DESCRIBE_CONFIGS,
    GROUP_DESCRIBE,
    TOPIC_DESCRIBE,
    TOPIC_READ,
    TRANSACTIONAL_ID_DESCRIBE,
    Denial,
)
from dgm.clients.settings import oidc_credentials
from dgm.config.analysis import audit_start
from dgm.config.document import DgmConfig
from dgm.config.loader import load_config
from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.util.command_line import seconds
from shell.connection import bootstrap_servers, client_config, pipeline_groups, pipeline_topics

PASS, FAIL, WARN = "✓", "✗", "!"
# The records the Java client reads: enough to need Read, few enough to take no time.
PROBE_RECORDS = 10


@dataclass(frozen=True)
class Check:
    mark: str  # PASS, FAIL or WARN (not checked, or optional)
    text: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.mark} {self.text}" + (f" — fix: {self.fix}" if self.fix else "")


def register(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="try every connection and permission dgm needs; one line per check, exit 0/1",
        description="Connects with each of dgm's Kafka clients (confluent-kafka, kafka-python, "
        "Spark's Java client) using [cluster.client], looks up the pipelines' topics and "
        "groups, tries each permission of the ACL table (docs/configuration.md) with the "
        "call that needs it, and checks that the Spark master answers, what the executors' "
        "Python must be and that the state directory is writable. Prints one line per check, "
        "✓ or ✗ with the fix (! for what is optional or cannot be checked from here); exits "
        "0 when nothing failed, 1 otherwise.",
    )
    check.add_argument("--bootstrap", help="host:port[,...] (default: from dgm.toml)")
    check.add_argument(
        "--master", help="Spark master URL (default: $DGM_SPARK_MASTER, else analysis.spark_master)"
    )
    check.add_argument(
        "--timeout", type=seconds, default=10.0, help="seconds one request may take (default 10)"
    )
    check.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if not args.verbose:
        # kafka-python logs every refused or failed request; the lines below say what matters.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    checks: list[Check] = []

    def report(check: Check) -> None:
        """Printed as soon as known: a slow check (Spark starting) does not hide the others."""
        checks.append(check)
        print(check.line(), flush=True)

    kafka_checks(config, args.bootstrap, args.timeout, report)
    for check in spark_checks(config, args.master):
        report(check)
    report(state_dir_check(config.state_dir))
    return 1 if any(c.mark == FAIL for c in checks) else 0


def principal(config: DgmConfig) -> str:
    """dgm's principal as the ACLs name it, as far as the settings tell."""
    client = config.cluster.client
    credentials = oidc_credentials(client)
    if credentials is not None:
        return f"{credentials.client_id} (or the token's sub)"
    return client.get("sasl.username") or "<dgm's principal>"


def kafka_checks(
    config: DgmConfig, override: str | None, timeout_s: float, add: Callable[[Check], None]
) -> None:
    """The three clients' connections and every permission, reported as they come."""
    servers = bootstrap_servers(config, override)
    check_bootstrap(servers)
    clients = Clients(client_config(config, override), timeout_s)
    try:
        view = _librdkafka(clients, servers, timeout_s, add)
        if view is None:
            return
        python_admin = _kafka_python(clients, add)
        found = None if python_admin is None else _capabilities(clients, view, add)
        if found is None:
            python_admin = None  # not connected, or its client was reset: no kafka-python check
        who = principal(config)
        producers = found is not None and found.has(PRODUCERS)
        readable = _topics(config, clients, python_admin, producers, timeout_s, who, add)
        if python_admin is not None:
            for group in pipeline_groups(config):
                what = GROUP_DESCRIBE.on(group)
                try:
                    denial = access.check_group_describe(python_admin, group, timeout_s)
                except Exception as error:  # kafka-python raises many kinds
                    add(_failed(what, error, clients))
                    continue
                add(_permission(what, denial, who))
        if python_admin is not None and found is not None and found.has(OPEN_TRANSACTIONS):
            count = access.visible_transactional_ids(python_admin)
            add(
                Check(
                    PASS,
                    f"{TRANSACTIONAL_ID_DESCRIBE.on('*')}: ListTransactions shows {count} "
                    "(only the ids dgm may describe: a producer's transactions missing from "
                    "the dashboard need Describe on its transactional id)",
                )
            )
        add(_cluster_configs(clients, view, timeout_s, who))
        if readable:
            add(_spark_client(config, servers, readable[0], clients, timeout_s))
        else:
            add(Check(WARN, "Spark's Java Kafka client: not tried: no readable pipeline topic"))
    finally:
        clients.close()


def _librdkafka(
    clients: Clients, servers: str, timeout_s: float, add: Callable[[Check], None]
) -> Any:
    name = "confluent-kafka (librdkafka)"
    try:
        metadata = clients.admin.list_topics(timeout=timeout_s)
    except KafkaException as error:
        reason = clients.last_error() or str(error.args[0].str())
        add(
            Check(
                FAIL,
                f"{name}: cannot connect to {servers}: {reason}",
                "check [cluster] bootstrap_servers and the [cluster.client] security settings",
            )
        )
        return None
    add(
        Check(
            PASS,
            f"{name}: connected to {servers} (cluster {metadata.cluster_id}, "
            f"{len(metadata.brokers)} broker(s), {len(metadata.topics)} topics visible)",
        )
    )
    return metadata


def _kafka_python(clients: Clients, add: Callable[[Check], None]) -> Any:
    name = "kafka-python"
    try:
        admin = clients.python_admin()
        groups = admin.list_groups()
    except ClusterUnreachable as error:
        add(Check(FAIL, f"{name}: {error}", "check the [cluster.client] security settings"))
        return None
    except Exception as error:  # kafka-python raises many kinds
        message = scrub(f"{type(error).__name__}: {error}", clients.settings)
        add(Check(FAIL, f"{name}: {message}", "check the [cluster.client] security settings"))
        return None
    add(Check(PASS, f"{name}: connected ({len(groups)} groups visible)"))
    return admin


def _capabilities(
    clients: Clients, view: Any, add: Callable[[Check], None]
) -> ClusterCapabilities | None:
    """What the cluster can answer (its brokers' ApiVersions): one line, then a `!` line per
    capability it lacks, said as a missing permission is. A gap is no failure. None when the
    brokers did not answer (a ✗)."""
    try:
        found = ask_capabilities(clients, DEFAULT_CLUSTER, view.brokers)
    except ClusterUnreachable as error:
        add(Check(FAIL, f"API versions: {error}", "is the cluster healthy? run `dgm check -v`"))
        return None
    names = ", ".join(c.name for c in found.present) or "none of dgm's capabilities"
    add(
        Check(
            PASS,
            f"capabilities of cluster {found.cluster} (Kafka {found.broker} by its brokers' "
            f"API versions): {names}",
        )
    )
    for gap in found.gaps:
        add(Check(WARN, gap.line(), gap.fix()))
    return found


def _topics(
    config: DgmConfig,
    clients: Clients,
    python_admin: Any,
    producers: bool,
    timeout_s: float,
    who: str,
    add: Callable[[Check], None],
) -> list[str]:
    """Describe and Read on each pipeline topic; the topics both passed. Read is tried with
    DescribeProducers: on a cluster without it (`producers` False) it is left to Spark's read."""
    readable = []
    topics = pipeline_topics(config)
    if not topics:
        add(Check(WARN, "no pipeline topics to check: declare [[pipelines]] in dgm.toml"))
    for topic in topics:
        try:
            denial = access.check_topic_describe(clients.admin, topic, timeout_s)
        except KafkaException as error:
            code = error.args[0].code()
            missing = code == KafkaError.UNKNOWN_TOPIC_OR_PART
            text = f"topic {topic} does not exist" if missing else f"topic {topic}: {error}"
            add(Check(FAIL, text, "create it, or fix the pipeline's topics in dgm.toml"))
            continue
        add(_permission(TOPIC_DESCRIBE.on(topic), denial, who))
        if denial is not None or python_admin is None:
            continue
        if not producers:
            what = TOPIC_READ.on(topic)
            add(Check(WARN, f"{what}: not tried with DescribeProducers, which this cluster lacks"))
            readable.append(topic)
            continue
        try:
            denial = access.check_topic_read(python_admin, clients.admin, topic, timeout_s)
        except Exception as error:  # kafka-python raises many kinds
            add(_failed(TOPIC_READ.on(topic), error, clients))
            continue
        add(_permission(TOPIC_READ.on(topic), denial, who))
        if denial is None:
            readable.append(topic)
        if not isinstance(audit_start(config.analysis.start), timedelta):
            continue
        lookup = access.check_offsets_for_times(dict(clients.settings), topic, timeout_s)
        add(_permission(f"offsets by timestamp of topic {topic} (analysis.start)", lookup, who))
    return readable


def _failed(what: str, error: BaseException, clients: Clients) -> Check:
    """A check whose call failed for another reason than a permission: no answer, no topic."""
    message = scrub(f"{type(error).__name__}: {error}", clients.settings)
    return Check(FAIL, f"{what}: {message}", "is the cluster healthy? run `dgm check -v`")


def _permission(what: str, denial: Denial | None, who: str) -> Check:
    if denial is None:
        return Check(PASS, what)
    mark = WARN if denial.permission.optional else FAIL
    optional = " (optional)" if denial.permission.optional else ""
    return Check(mark, denial.line() + optional, denial.fix(who))


def _cluster_configs(clients: Clients, view: Any, timeout_s: float, who: str) -> Check:
    what = f"{CLUSTER_DESCRIBE_CONFIGS.on('')} (optional)"
    if not view.brokers:
        return Check(WARN, f"{what}: not tried: no broker in the metadata")
    try:
        denial = access.check_cluster_describe_configs(clients.admin, min(view.brokers), timeout_s)
    except KafkaException as error:
        return Check(WARN, f"{what}: {error.args[0].str()}")
    return _permission(what, denial, who)


def _spark_client(
    config: DgmConfig, servers: str, topic: str, clients: Clients, timeout_s: float
) -> Check:
    """A bounded read of the topic's newest records through Spark's Kafka source, in a local
    Spark on this host: the Java client with the settings the audit uses."""
    from spark_jobs.audit.cluster_sources import kafka_options
    from spark_jobs.audit.denials import refused_topics
    from spark_jobs.audit.probe import read_probe

    name = "Spark's Java Kafka client"
    low, high = _watermarks(clients, topic, timeout_s)
    start = max(low, high - PROBE_RECORDS)
    spark, started = _spark_session()
    try:
        count = read_probe(spark, kafka_options(config, servers), topic, 0, start, high)
    except Exception as error:  # Py4J and Spark wrap the Java client's exception
        if refused_topics(error):
            denial = Denial(TOPIC_READ, topic)
            return Check(FAIL, f"{name}: {denial.line()}", denial.fix(principal(config)))
        first = scrub(str(error).strip().splitlines()[0], clients.settings)
        return Check(FAIL, f"{name}: {first}", "check the [cluster.client] security settings")
    finally:
        if started:
            spark.stop()
    return Check(
        PASS, f"{name}: read {count} records of {topic}[0] (offsets {start}..{high}, from here)"
    )


def _watermarks(clients: Clients, topic: str, timeout_s: float) -> tuple[int, int]:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    partition = TopicPartition(topic, 0)
    found = []
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest()):  # type: ignore[no-untyped-call]
        futures = clients.admin.list_offsets({partition: spec}, request_timeout=timeout_s)
        found.append(int(futures[partition].result(timeout=timeout_s + 5).offset))
    return found[0], found[1]


def _spark_session() -> tuple[Any, bool]:
    """The running SparkSession (tests), else a local one started here: (session, started)."""
    from spark_jobs.session import build_session, running_session

    running = running_session()
    if running is not None:
        return running, False
    return build_session(master="local[1]", app_name="dgm-check", shuffle_partitions=1), True


def spark_checks(config: DgmConfig, master_override: str | None) -> list[Check]:
    master = master_override or config.analysis.spark_master
    interpreter = f"{sys.executable}, Python {platform.python_version()}"
    if master.startswith("local"):
        return [
            Check(PASS, f"Spark master {master}: Spark runs inside dgm"),
            Check(
                PASS, f"executors' Python: local mode runs them in this interpreter ({interpreter})"
            ),
        ]
    import pyspark

    required = (
        f"executors' Python: not checked from here: each worker must run Python "
        f"{platform.python_version_tuple()[0]}.{platform.python_version_tuple()[1]} with pyspark "
        f"{pyspark.__version__}, as this driver ({interpreter})"
    )
    python = Check(WARN, required, "set PYSPARK_PYTHON on the workers to such an interpreter")
    if not master.startswith("spark://"):
        return [Check(WARN, f"Spark master {master}: only spark:// masters are checked"), python]
    failed = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                pass
        except (OSError, ValueError) as error:
            failed.append(f"{address}: {error}")
    if failed:
        fix = "start it, or fix analysis.spark_master / DGM_SPARK_MASTER / --master"
        return [
            Check(FAIL, f"Spark master {master} does not answer ({'; '.join(failed)})", fix),
            python,
        ]
    return [Check(PASS, f"Spark master {master} answers"), python]


def state_dir_check(state_dir: Path) -> Check:
    probe = state_dir / f".dgm-check-{uuid.uuid4().hex}"
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        return Check(
            FAIL,
            f"state directory {state_dir} is not writable: {error.strerror}",
            "set state_dir (or DGM_STATE_DIR) to a directory dgm's user may write",
        )
    return Check(PASS, f"state directory {state_dir} is writable")
