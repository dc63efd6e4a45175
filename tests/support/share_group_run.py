"""The lab's share-group relay (lab/share_group.py) in both orders, each SIGKILLed twice, and
Kafka's console share consumer piped into its console producer (lab/console/, no dgm header),
with the collectors sampling every second, once per test session: the lab's test reads the
runs' topics (tests/lab/test_share_group.py), the scenario judges them
(tests/scenarios/test_share_group_verdicts.py)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from dgm.config.loader import load_config
from dgm.util.waiting import wait_until
from lab.console.run import ConsoleLabReport, ConsoleLabSettings, run_console_lab
from lab.processors.share_relay import Order
from lab.share_group import ShareGroupReport, ShareGroupSettings, run_share_group
from tests.support.published_lab import collecting, offsets_samples, wait_for_cycles

MESSAGES = 600
CONSOLE_MESSAGES = 1500  # 15 s at 100 a second: both kills land while records flow
MAX_DELAY = timedelta(seconds=4)  # the deadline the scenario judges them by


@dataclass(frozen=True)
class ShareGroupRuns:
    redelivering: ShareGroupReport  # produce-first: kills leave batches to be redelivered
    losing: ShareGroupReport  # acknowledge-first: kills lose batches
    # Kafka's console share consumer piped into its console producer, no dgm header anywhere,
    # its consumer SIGKILLed twice: what it printed and had not acknowledged would come back.
    console: ConsoleLabReport
    state_dir: Path  # the collectors' samples of the three runs
    config_path: Path  # their dgm.toml (state_dir, [analysis]); no pipeline yet


def run_collected(kafka: Any, root: Path) -> ShareGroupRuns:
    """Both runs (MESSAGES records each), sampled until every record is older than
    MAX_DELAY and two more samples show the topics' ends."""
    state_dir, config_path = root / "state", root / "dgm.toml"
    config_path.write_text(
        f'state_dir = "{state_dir}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\nmin_records = 1\n'
    )
    orders: tuple[tuple[Order, int], ...] = (("produce-first", 41), ("acknowledge-first", 43))
    with collecting(kafka.bootstrap_servers, load_config(config_path), interval_s=1.0):
        # The three runs share nothing but the broker (their own topics, groups and folders),
        # so they run side by side: each is still killed as it would be alone.
        with ThreadPoolExecutor(max_workers=3) as pool:
            relays = {
                order: pool.submit(run_share_group, relay(kafka, root, order, seed))
                for order, seed in orders
            }
            consoled = pool.submit(
                run_console_lab,
                ConsoleLabSettings(
                    kafka.bootstrap_servers, root / "console", name="console-share",
                    messages=CONSOLE_MESSAGES, rate=100.0, kills=2, share_group=True, seed=44,
                    progress=lambda line: None,
                ),
            )  # fmt: skip
            runs = {order: future.result() for order, future in relays.items()}
            console = consoled.result()
        assert console.caught_up, f"not caught up; see {console.run_dir}"
        # The analysis judges as of its newest sample: two must come once every record is
        # older than max_delay, or the last ones are still pending.
        settled = console.finished_at + MAX_DELAY.total_seconds()
        wait_until(lambda: time.time() > settled, 60, "every record older than max_delay")
        wait_for_cycles(state_dir, offsets_samples(state_dir) + 2)
    return ShareGroupRuns(
        runs["produce-first"], runs["acknowledge-first"], console, state_dir, config_path
    )


def relay(kafka: Any, root: Path, order: Order, seed: int) -> ShareGroupSettings:
    return ShareGroupSettings(
        kafka.bootstrap_servers, root / "lab", order, messages=MESSAGES, seed=seed,
        progress=lambda line: None,
    )  # fmt: skip
