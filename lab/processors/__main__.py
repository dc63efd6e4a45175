"""`python -m lab.processors --mode MODE --settings-json JSON`: one processor process.

Exit status: 0 after SIGTERM/SIGINT (a clean stop), 2 for bad settings, 3 when fenced, 4 when
a client call hung past its deadline (lab.processors.watchdog).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence

from lab.processors import (
    commit_order,
    exactly_once,
    exactly_once_broken,
    idempotent_sink,
    postgres_modes,
)
from lab.processors.announce import settings_text
from lab.processors.settings import MODES, ProcessorSettings, SettingsError

RUNNERS: dict[str, Callable[[ProcessorSettings, threading.Event], int]] = {
    "at-most-once": commit_order.run_at_most_once,
    "at-least-once": commit_order.run_at_least_once,
    "exactly-once": exactly_once.run,
    "exactly-once-broken": exactly_once_broken.run,
    "idempotent-sink": idempotent_sink.run,
    "postgres-exactly-once": postgres_modes.run_exactly_once,
    "postgres-at-least-once": postgres_modes.run_at_least_once,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.processors")
    parser.add_argument("--mode", required=True, choices=MODES)
    parser.add_argument(
        "--settings-json",
        required=True,
        help="a ProcessorSettings object; '-' reads it from stdin (keeps client secrets off "
        "the command line, which every local user can read)",
    )
    args = parser.parse_args(argv)
    text = settings_text(args.settings_json)
    try:
        settings = ProcessorSettings.from_json(text).with_mode_check(args.mode)
    except SettingsError as error:
        print(f"dgm lab processor: error: {error}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format=f"%(asctime)s {args.mode}/{settings.instance} pid {os.getpid()} "
        "%(levelname)s: %(message)s",
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    return RUNNERS[args.mode](settings, stop)


if __name__ == "__main__":
    sys.exit(main())
