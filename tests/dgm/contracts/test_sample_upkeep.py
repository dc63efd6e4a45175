"""The sample store stays bounded and loses nothing: old files compacted per hour, files
beyond retention deleted, covered originals removed after they linger; a SIGKILL at any point
of an upkeep pass leaves every committed row readable exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

from dgm.contracts.sample_upkeep import HOUR_MS, keep_bounded
from dgm.contracts.samples import SampleStore, span, uncovered
from tests.support.sample_files import NOW, NOW_MS, details, filled
from tests.support.strength import by_strength


def hours_of(store: SampleStore) -> Counter[int]:
    """Listed files per clock hour of their first row."""
    return Counter(span(p.name)[0][0] // HOUR_MS for p in store.files("events"))  # type: ignore[index]


def test_each_finished_minute_and_hour_ends_in_one_file_and_rows_are_read_once(
    tmp_path: Path,
) -> None:
    store, before = filled(tmp_path, hours=3, every_s=10)  # 09:00:00 .. 11:59:50
    assert len(store.files("events")) == 1080
    done = keep_bounded(store, NOW, retention=timedelta(hours=24), linger_s=3600)
    # Covered originals linger: readers skip them, so nothing is read twice meanwhile.
    assert details(store) == before
    hour = NOW_MS // HOUR_MS
    # 09 and 10 are over: one file each. 11 is not: a file per finished minute (11:00-11:58)
    # and the 6 files of 11:59, whose minute ends with NOW.
    assert hours_of(store) == {hour - 3: 1, hour - 2: 1, hour - 1: 59 + 6}
    assert done.written == 2 * 60 + 59 + 2 and len(store.covered("events")) > 1000
    keep_bounded(store, NOW, retention=timedelta(hours=24), linger_s=0)
    assert store.covered("events") == [] and details(store) == before
    # A day later the day is one file (and the newest file, never merged), every row in it.
    later = NOW + timedelta(days=1)
    keep_bounded(store, later, retention=timedelta(days=3), linger_s=0)
    assert len(store.files("events")) == 2 and details(store) == before


def test_files_beyond_retention_go_and_the_newest_stays(tmp_path: Path) -> None:
    store, before = filled(tmp_path, hours=2, every_s=600)
    done = keep_bounded(store, NOW, retention=timedelta(minutes=30), linger_s=0)
    kept = details(store)
    assert done.expired > 0 and sum(kept.values()) < sum(before.values())
    assert all(before[d] == 1 for d in kept)
    oldest_ms = min(span(p.name)[1][0] for p in store.files("events"))  # type: ignore[index]
    assert oldest_ms >= NOW_MS - 30 * 60_000
    # Nothing new for days: the last file still holds the state a collector restarts from.
    keep_bounded(store, NOW + timedelta(days=3), retention=timedelta(minutes=30), linger_s=0)
    assert len(store.files("events")) == 1


def test_a_new_file_after_compaction_sorts_after_everything(tmp_path: Path) -> None:
    store, _ = filled(tmp_path, hours=2)
    keep_bounded(store, NOW, retention=timedelta(hours=24), linger_s=0)
    newest = store.latest("events")
    new = store.write("events", [])
    assert new.name > newest.name  # type: ignore[union-attr]
    assert store.latest("events") == new
    assert store.files_after("events", newest) == [new]


def test_covering_nests_and_never_hides_a_file_outside_its_span() -> None:
    names = [
        "0000000000001-000000-0000000000005-000000.parquet",
        "0000000000001-000000.parquet",
        "0000000000003-000001.parquet",
        "0000000000001-000000-0000000000009-000000.parquet",
        "0000000000010-000000.parquet",
    ]
    kept, covered = uncovered(Path(n) for n in names)
    assert [p.name for p in kept] == [names[3], names[4]]
    assert sorted(p.name for p in covered) == sorted(names[:3])


UPKEEP_LOOP = """
import sys
from datetime import timedelta
from pathlib import Path
from dgm.contracts.sample_upkeep import keep_bounded
from dgm.contracts.samples import SampleStore
from tests.support.sample_files import NOW
store = SampleStore(Path(sys.argv[1]))
print("ready", flush=True)
while True:
    keep_bounded(store, NOW, retention=timedelta(days=30), linger_s=0)
"""


# Hours of files every 10 s: a first pass over 4 hours took ~6.5 s of work on a slow run and
# under 2 s on a fast one (8 hours twice that), so a kill comes 0.1-1.5 s after a start: the
# first kills land inside the first pass however fast the machine is.
HOURS, KILLS = by_strength((4, 8), (12, 12))


def test_sigkill_at_any_point_of_upkeep_loses_no_row_and_doubles_none(tmp_path: Path) -> None:
    store, before = filled(tmp_path, hours=HOURS, every_s=10)
    dice = random.Random(7)
    mid_pass = 0  # kills that left a merged file's originals or a temp file behind
    kills = 0
    # At least KILLS kills, and on until 3 landed inside a pass (a loaded machine starts the
    # passes later): without those the test would prove nothing; bounded all the same.
    while kills < KILLS or (mid_pass < 3 and kills < 4 * KILLS):
        kill, kills = kills, kills + 1
        process = subprocess.Popen(
            [sys.executable, "-c", UPKEEP_LOOP, str(store.root.parent)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[3],
        )
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        time.sleep(dice.uniform(0.1, 1.5))
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
        assert details(store) == before, f"after kill {kill + 1}"
        mid_pass += bool(store.covered("events") or list(store.kind_dir("events").glob(".*")))
    print(f"{mid_pass} of {kills} kills landed inside a pass")
    assert mid_pass >= 3
    keep_bounded(store, NOW, retention=timedelta(days=30), linger_s=0)
    assert details(store) == before
    # Every hour but the last in a file each; the last one's minutes but its last in a file
    # each; the last minute's 6 files as they are.
    assert len(store.files("events")) == (HOURS - 1) + 59 + 6 and store.covered("events") == []


def test_an_original_goes_once_its_first_cover_lingered_even_if_a_newer_cover_came(
    tmp_path: Path,
) -> None:
    # Seen over an hour at 1 s: when an hour file covered minute files anew, their originals
    # waited another linger period, and the store grew by half at every hour boundary.
    store, before = filled(tmp_path, hours=1, every_s=10)  # 11:00:00 .. 11:59:50
    keep_bounded(store, NOW - timedelta(seconds=30), timedelta(hours=24), linger_s=300)
    minute_files = [p for p in store.files("events") if span(p.name)[0] != span(p.name)[1]]  # type: ignore[index]
    assert len(minute_files) == 59 and len(store.covered("events")) == 59 * 6  # 11:00-11:58
    for path in minute_files:  # they were written 10 minutes ago
        os.utime(path, (time.time() - 600, time.time() - 600))
    keep_bounded(store, NOW + timedelta(seconds=30), timedelta(hours=24), linger_s=300)
    # The hour file is new, but the minute files covered their originals long enough: gone.
    # Left: the 60 minute files and 11:59's 5 originals, all covered just now.
    covered = [span(p.name) for p in store.covered("events")]
    assert sorted(s[0] == s[1] for s in covered) == [False] * 60 + [True] * 5  # type: ignore[index]
    assert details(store) == before
