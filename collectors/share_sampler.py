"""Share groups asked beside the cycle, not in its path.

DescribeShareGroupOffsets sometimes takes the broker about 2 s to answer (Kafka 4.4.0: 3 of 15
calls in one run, 5 of 8 in another; docs/compatibility.md), where every other request of a
cycle takes milliseconds. Waited for in the cycle, that stretched one-second cycles to three
and put the lag-in-seconds pace out of step with the clock. So each cycle asks at its start,
on a client of its own, and takes the answer if it comes before the cycle's interval is up.

An answer may therefore be up to one request old when a cycle takes it (a request still in
flight is not asked again). That is a lower bound of what the sample's time would have shown:
share-partition start offsets only grow, so what they claim is still claimed.
"""

from __future__ import annotations

import logging
import threading

from collectors.clients import Clients, ClusterUnreachable
from collectors.events import GroupView
from collectors.share_groups import ShareSample, fetch_share_groups, view

log = logging.getLogger(__name__)


class _Asked:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.sample = ShareSample(failed=True)


class ShareGroupSampler:
    """One share-group request at a time, on its own thread and kafka-python client."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients
        self._asked: _Asked | None = None  # in flight, or answered and not yet taken
        # The share groups as last answered, carried while no answer comes: a group that
        # merely answered late must not count as gone and back (group events).
        self.views: dict[str, GroupView] = {}
        self.heard_back = False  # whether a request came back yet (answer or failure)

    def ask(self) -> None:
        """Start a request unless one is in flight (its answer will serve)."""
        if self._asked is not None and not self._asked.done.is_set():
            return
        asked = self._asked = _Asked()
        threading.Thread(target=self._run, args=(asked,), name="share-groups", daemon=True).start()

    def answer(self, wait_s: float) -> ShareSample | None:
        """The newest answer, waited for up to `wait_s`; None if none came in that time or
        the requests failed."""
        asked = self._asked
        if asked is None or not asked.done.wait(max(0.0, wait_s)):
            return None
        self._asked, self.heard_back = None, True
        if asked.sample.failed:
            return None
        self.views = {g: view(d) for g, d in asked.sample.descriptions.items()}
        return asked.sample

    def _run(self, asked: _Asked) -> None:
        try:
            asked.sample = fetch_share_groups(self.clients.share_admin())
        except ClusterUnreachable as error:  # no client: the cycle's own requests say so
            log.debug("share groups not asked: %s", error)
        if asked.sample.failed:
            self.clients.reset_share_admin()  # a kafka-python client does not recover
        asked.done.set()
