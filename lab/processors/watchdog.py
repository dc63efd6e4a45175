"""A hard deadline on a client call that can block past its own timeout.

librdkafka's `send_offsets_to_transaction` ignores its timeout when the group coordinator is
away (confluentinc/librdkafka#5456, #5511): after a whole-cluster outage the exactly-once
processor blocked in it for good, assigned and idle while its source grew. A real deployment
restarts such a process; so does the lab: past the deadline the process exits with
`EXIT_HUNG`, its supervisor starts a new instance, whose `init_transactions` fences the old
transactional id and aborts what it left open.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger("lab.processor")

EXIT_HUNG = 4
# Beyond the call's own timeout: time for it to time out by itself first.
GRACE_S = 15.0


@contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Exit the process with EXIT_HUNG if the block is still running after `seconds`."""
    timer = threading.Timer(seconds, _hung, args=(what, seconds))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _hung(what: str, seconds: float) -> None:
    log.error("%s still blocked after %.0f s: exiting for a restart", what, seconds)
    sys.stderr.flush()
    os._exit(EXIT_HUNG)
