"""The collector loop: a cycle every interval, outages survived with capped exponential
backoff (logged once, recorded as outage_start/outage_end events), a clean stop on request."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from collectors.clients import ClusterUnreachable
from collectors.cycle import Collector, CycleSummary, utc_now
from collectors.events import Event
from collectors.partitions import ClusterView
from dgm.util.errors import UserFacingError
from dgm.util.waiting import next_delay

log = logging.getLogger(__name__)

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 30.0


class CannotCollect(UserFacingError):
    pass


class Runner:
    def __init__(
        self,
        collector: Collector,
        interval_s: float,
        stop: threading.Event,
        connect_timeout_s: float = 30.0,
        report: Callable[[str], None] = print,
        upkeep: Callable[[], None] | None = None,
        upkeep_every_s: float = 15.0,
        sampled_before: bool = False,
    ) -> None:
        self.collector = collector
        # The state holds samples of a cluster: one that does not answer at start is down
        # (the collector restarted during an outage), not misconfigured: wait for it.
        self.sampled_before = sampled_before
        self.interval_s = interval_s
        self.stop = stop
        self.connect_timeout_s = connect_timeout_s
        self.report = report
        # Keeps the sample store bounded (dgm.contracts.sample_upkeep), between two cycles.
        self.upkeep = upkeep
        self.upkeep_every_s = upkeep_every_s
        self._upkept_at: float | None = None

    def start(self) -> ClusterView:
        """The first contact: a cluster that never answers is a configuration problem (wrong
        address, wrong security settings), reported as such instead of retried forever;
        unless this state dir sampled it before (`sampled_before`): then it is waited for."""
        deadline = time.monotonic() + self.connect_timeout_s
        delay = None
        waiting = False  # past the deadline, for a cluster sampled before
        clients = self.collector.clients
        while True:
            left = max(0.5, deadline - time.monotonic())
            try:
                return self.collector.connect(min(self.collector.request_timeout_s, left))
            except ClusterUnreachable as error:
                reason = clients.last_error() or str(error)
                if clients.authentication_failed():  # retrying cannot fix the settings
                    raise CannotCollect(
                        f"Kafka at {clients.bootstrap_servers} rejected the connection's "
                        f"security settings ([cluster.client] security.protocol, sasl.*, "
                        f"ssl.*): {reason}"
                    ) from None
                if time.monotonic() >= deadline and not waiting:
                    if not self.sampled_before:
                        raise CannotCollect(
                            f"cannot reach Kafka at {clients.bootstrap_servers} within "
                            f"{self.connect_timeout_s:g}s: {reason}"
                        ) from None
                    waiting = True
                    log.warning(
                        "Kafka at %s does not answer (%s); it was sampled before, so waiting "
                        "for it with backoff up to %gs (a wrong address never answers: check "
                        "[cluster] bootstrap_servers if this lasts)",
                        clients.bootstrap_servers,
                        reason,
                        MAX_DELAY_S,
                    )
            delay = next_delay(delay, FIRST_DELAY_S, MAX_DELAY_S)
            wait = delay if waiting else min(delay, max(0.0, deadline - time.monotonic()))
            if self.stop.wait(wait):
                raise KeyboardInterrupt

    def run_once(self) -> CycleSummary:
        self.start()
        try:
            summary = self.collector.cycle()
        except ClusterUnreachable as error:
            reason = self.collector.clients.last_error() or str(error)
            raise CannotCollect(f"the cluster stopped answering mid-cycle: {reason}") from None
        assert summary is not None  # nothing asks a single cycle to stop
        self.report(summary.line())
        return summary

    def run_forever(self) -> None:
        self.start()
        outage: tuple[float, str] | None = None  # (monotonic start, reason)
        delay = None
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                summary = self.collector.cycle(should_stop=self.stop.is_set)
            except ClusterUnreachable as error:
                if outage is None:
                    outage = (began, self._outage_started(error))
                delay = next_delay(delay, FIRST_DELAY_S, MAX_DELAY_S)
                self.stop.wait(delay)
                continue
            if outage is not None:
                self._outage_ended(outage[0])
                outage, delay = None, None
            if summary is None:
                break
            self.report(summary.line())
            self._keep_bounded()
            self.stop.wait(max(0.0, self.interval_s - (time.monotonic() - began)))

    def _keep_bounded(self) -> None:
        now = time.monotonic()
        if self.upkeep is None or (
            self._upkept_at is not None and now - self._upkept_at < self.upkeep_every_s
        ):
            return
        self._upkept_at = now
        self.upkeep()

    def _cluster_id(self) -> str:
        assert self.collector.cluster_id is not None  # set by start()
        return self.collector.cluster_id

    def _outage_started(self, error: ClusterUnreachable) -> str:
        reason = self.collector.clients.last_error() or str(error)
        log.warning(
            "Kafka at %s stopped answering (%s); retrying with backoff up to %gs, "
            "quiet until it answers",
            self.collector.clients.bootstrap_servers,
            reason,
            MAX_DELAY_S,
        )
        event = Event(utc_now(), self._cluster_id(), "outage_start", f"unreachable: {reason}")
        self.collector.record([event])
        return reason

    def _outage_ended(self, began: float) -> None:
        length_ms = int((time.monotonic() - began) * 1000)
        log.warning("Kafka answers again after %.1fs; collecting", length_ms / 1000)
        detail = f"answered again after {length_ms / 1000:.1f}s"
        event = Event(utc_now(), self._cluster_id(), "outage_end", detail, after=length_ms)
        self.collector.record([event])
