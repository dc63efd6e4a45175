"""A loopback TCP fault proxy in front of a broker's FAULT listener that speaks just enough of
the Kafka wire protocol to know which response answers which request, so it can delay broker
responses or drop the answer to a Produce request. A dropped ack is the real failure behind
producer-retry duplicates: the broker has written the batch, the client never hears so, and
retries it on a new connection.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType

from embedded_kafka.cluster import EmbeddedCluster

PRODUCE = 0  # Kafka api key of a Produce request
_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_MAX_FRAME = 256 * 1024 * 1024  # beyond any sane Kafka frame: the stream is not Kafka

log = logging.getLogger(__name__)


class NotKafka(ValueError):
    pass


def request_header(frame: bytes) -> tuple[int, int]:
    """(api_key, correlation_id) of a request frame (the bytes after the size prefix)."""
    if len(frame) < _REQUEST_HEADER.size:
        raise NotKafka(f"a {len(frame)}-byte request is too short for a Kafka request header")
    api_key, _version, correlation_id = _REQUEST_HEADER.unpack_from(frame)
    return api_key, correlation_id


def response_correlation(frame: bytes) -> int:
    """The correlation id a response frame answers (its first field, in every header version)."""
    if len(frame) < _SIZE.size:
        raise NotKafka(f"a {len(frame)}-byte response is too short for a correlation id")
    return int(_SIZE.unpack_from(frame)[0])


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    buffer = bytearray(count)
    view, got = memoryview(buffer), 0
    while got < count:
        received = sock.recv_into(view[got:])
        if received == 0:
            return None
        got += received
    return bytes(buffer)


def read_frame(sock: socket.socket) -> bytes | None:
    """One size-prefixed Kafka frame's payload; None when the peer closed the connection."""
    prefix = _read_exactly(sock, _SIZE.size)
    if prefix is None:
        return None
    (size,) = _SIZE.unpack(prefix)
    if not 0 <= size <= _MAX_FRAME:
        raise NotKafka(f"frame size {size} is not a Kafka frame")
    return _read_exactly(sock, size)


class _Link:
    """One client connection and its connection to the broker, pumped by two threads."""

    def __init__(self, proxy: FaultProxy, client: socket.socket, broker: socket.socket) -> None:
        self.proxy, self.client, self.broker = proxy, client, broker
        self.api_keys: dict[int, int] = {}  # correlation id -> api key of requests in flight
        self.closed = threading.Event()

    def start(self) -> None:
        for pump in (self._requests, self._responses):
            threading.Thread(target=self._guarded(pump), daemon=True).start()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.broker):
            # shutdown first: it wakes the other pump, blocked in recv on this socket.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self.proxy._forget(self)

    def _guarded(self, pump: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                pump()
            except (OSError, NotKafka) as error:
                if not self.closed.is_set():
                    log.debug("fault proxy link ends: %s", error)
            finally:
                self.close()

        return run

    def _requests(self) -> None:
        while (frame := read_frame(self.client)) is not None:
            api_key, correlation_id = request_header(frame)
            self.api_keys[correlation_id] = api_key  # before forwarding: the answer may be quick
            self.broker.sendall(_SIZE.pack(len(frame)) + frame)

    def _responses(self) -> None:
        while (frame := read_frame(self.broker)) is not None:
            api_key = self.api_keys.pop(response_correlation(frame), None)
            if api_key == PRODUCE and self.proxy._drop_this_one():
                return  # the batch is written, the ack never arrives: close, the client retries
            delay = self.proxy._delay
            if delay > 0 and self.closed.wait(delay):
                return
            self.client.sendall(_SIZE.pack(len(frame)) + frame)


class FaultProxy:
    """Listens on host:listen_port, forwards each connection to host:target_port."""

    def __init__(self, listen_port: int, target_port: int, host: str = "127.0.0.1") -> None:
        self.listen_port, self.target_port, self.host = listen_port, target_port, host
        self._drop_probability = 0.0
        self._delay = 0.0
        self._dropped = 0
        self._random = random.Random()
        self._lock = threading.Lock()
        self._links: set[_Link] = set()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    # -- faults --------------------------------------------------------------------------------

    def drop_produce_responses(self, probability: float) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"a drop probability is within [0, 1], got {probability}")
        self._drop_probability = probability

    def delay_responses(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a delay is >= 0 seconds, got {seconds}")
        self._delay = seconds

    @property
    def dropped(self) -> int:
        return self._dropped

    def _drop_this_one(self) -> bool:
        with self._lock:
            if self._random.random() < self._drop_probability:
                self._dropped += 1
                return True
            return False

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Listen and accept in a background thread; a no-op if already started."""
        if self._listener is not None:
            return
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((self.host, self.listen_port))
        except OSError as error:
            listener.close()
            where = f"{self.host}:{self.listen_port}"
            raise OSError(f"fault proxy cannot listen on {where}: {error}") from None
        listener.listen(64)
        listener.settimeout(0.2)  # so the accept loop notices stop()
        self._listener = listener
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    def stop(self) -> None:
        """Stop listening and close every proxied connection; idempotent."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if self._acceptor is not None:
            self._acceptor.join(5)
            self._acceptor = None
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close()

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # the listener was closed by stop()
            try:
                broker = socket.create_connection((self.host, self.target_port), timeout=5)
            except OSError as error:  # the broker is down (restarting): the client reconnects
                log.debug("fault proxy cannot reach %s: %s", self.target_port, error)
                client.close()
                continue
            for sock in (client, broker):
                sock.settimeout(None)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(self, client, broker)
            with self._lock:
                self._links.add(link)
            link.start()

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)


def proxies_for(cluster: EmbeddedCluster) -> list[FaultProxy]:
    """One started proxy per broker: it listens on the FAULT listener's advertised port and
    forwards to the port that listener binds, so clients bootstrapping from
    `cluster.fault_bootstrap_servers` talk to every broker through a proxy. Stop them when done
    (start() is idempotent, so using each as a context manager works too)."""
    proxies: list[FaultProxy] = []
    try:
        for node in cluster.nodes:
            proxy = FaultProxy(node.ports.fault_advertised_port, node.ports.fault_listen_port)
            proxy.start()
            proxies.append(proxy)
    except OSError:
        for proxy in proxies:
            proxy.stop()
        raise
    return proxies
