"""exactly-once-broken: the exactly-once processor, misconfigured the common way.

Everything is transactional except the input: it is read read_uncommitted, so records of the
source's aborted transactions are processed and committed downstream (aborted reads).
"""

from __future__ import annotations

import threading

from lab.processors import exactly_once
from lab.processors.settings import ProcessorSettings


def run(settings: ProcessorSettings, stop: threading.Event) -> int:
    return exactly_once.run(settings, stop, isolation="read_uncommitted")
