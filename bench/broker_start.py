"""Time for `dgm`'s embedded Kafka to answer a metadata request, from a cold (fresh) data dir.

    python -m bench.broker_start --runs 5

Prints one line per run and the median, for 1 and 3 brokers, with the jars already cached
(the first download is a one-off and is reported by `dgm broker fetch`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.distribution import resolve_distribution


def time_start(brokers: int) -> float:
    with tempfile.TemporaryDirectory() as state:
        cluster = EmbeddedCluster(Path(state), brokers=brokers, die_with_parent=True)
        began = time.monotonic()
        cluster.start(fresh=True)
        elapsed = time.monotonic() - began
        cluster.stop()
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--brokers", type=int, nargs="+", default=[1, 3])
    args = parser.parse_args()
    resolve_distribution()
    for brokers in args.brokers:
        times = [time_start(brokers) for _ in range(args.runs)]
        print(
            f"{brokers} broker(s): median {statistics.median(times):.2f}s  "
            f"runs {' '.join(f'{t:.2f}' for t in times)}"
        )


if __name__ == "__main__":
    main()
