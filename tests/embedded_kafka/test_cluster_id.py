import uuid

import pytest

from embedded_kafka import cluster


def test_a_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to '-' first in url-safe base64: kafka-storage would read it as an option.
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x10" * 16)])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    assert cluster._new_cluster_id() == "EBAQEBAQEBAQEBAQEBAQEA"
