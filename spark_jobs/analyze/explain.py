"""Causes without dgm's headers (docs/design.md, "Causes without dgm's headers"): the cause
of a duplicate that no dgm header explains, read from what the log and the collectors hold.

Per extra copy, against the copy before it: the producer session of each copy (the record
batch headers: producer id, epoch, sequence; copy_producers.py reads them), when each became
readable (the LSO samples, lag_seconds.Arrivals) and the events of the pipeline's consumer
group between the two (group_timeline). The rules, in order, are `_rules`; a copy they do not
decide keeps `unknown`, with what was seen as its evidence. Then replay runs: extra copies
at consecutive sink offsets rewriting one source partition in source order (a processor
without a group, such as MirrorMaker 2, replaying from its checkpoint) are named as a run.

Pure functions over pandas on the driver: the duplicates table is small next to the
fingerprints, and every input here is a sample kind or a lookup of its copies' batches.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from dgm.contracts.vocabulary import DuplicateCause
from spark_jobs.analyze.lag_seconds import arrivals, nanos

# The group events that move partitions between consumers: after one, a partition's records
# from the last commit on are read again. commit_backwards: a committed offset that went down.
GROUP_EVENTS = ("rebalance", "member_joined", "member_left")
COMMIT_BACKWARDS = "commit_backwards"
# Evidence of the causes the dgm headers decide (duplicates.CAUSES).
HEADER_EVIDENCE = {
    DuplicateCause.ABORTED_READ.value: "the source holds the id only in aborted transactions",
    DuplicateCause.UPSTREAM.value: "the source holds the id in more than one committed record",
}
_UNKNOWN = DuplicateCause.UNKNOWN.value
RESENT_BATCH = "a resent batch: the same record timestamp, no producer id, no group event between"
ONE_SEND = "one send at two offsets: "
_COPY = ["pipeline", "topic", "message_id"]


def group_timeline(events: pd.DataFrame, group_offsets: pd.DataFrame) -> pd.DataFrame:
    """(group_id, at_ns, event, detail) of every group event, in time order: the collectors'
    rebalances and member changes, and commit_backwards (a partition's committed offset lower
    than at the sample before, for the same group)."""
    moved = events[events["event"].isin(GROUP_EVENTS) & events["group_id"].notna()]
    found = [
        pd.DataFrame(
            {
                "group_id": moved["group_id"],
                "at_ns": nanos(moved["sampled_at"]),
                "event": moved["event"],
                "detail": moved["detail"],
            }
        )
    ]
    if len(group_offsets):
        ordered = group_offsets.sort_values(["group_id", "topic", "partition", "sampled_at"])
        before = ordered.groupby(["group_id", "topic", "partition"])["committed_offset"].shift(1)
        back = ordered[ordered["committed_offset"] < before]
        was = before[back.index].astype("int64")
        found.append(
            pd.DataFrame(
                {
                    "group_id": back["group_id"],
                    "at_ns": nanos(back["sampled_at"]),
                    "event": COMMIT_BACKWARDS,
                    "detail": [
                        f"{t}[{p}] committed offset {w} -> {int(c)}"
                        for t, p, w, c in zip(
                            back["topic"],
                            back["partition"],
                            was,
                            back["committed_offset"],
                            strict=True,
                        )
                    ],
                }
            )
        )
    timeline = pd.concat(found, ignore_index=True)
    return timeline.sort_values("at_ns", kind="stable").reset_index(drop=True)


def copy_arrivals(copies: pd.DataFrame, offsets: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(arrived ns, resolution ns) of each copy (topic, partition, offset): when the LSO
    passed it; NaN where no retained sample has. Positions per partition by one sort, not a
    pandas group each: a cycle asks for every copy of every duplicate."""
    when = np.full(len(copies), np.nan)
    width = np.full(len(copies), np.nan)
    if copies.empty:
        return when, width
    # A partition's code from its topic's and its number: factorizing (topic, partition)
    # pairs builds a tuple per copy.
    topic_codes, topics = pd.factorize(copies["topic"].astype(str))
    number = copies["partition"].to_numpy(dtype=np.int64)
    span = int(number.max()) + 1
    pairs, codes = np.unique(topic_codes * span + number, return_inverse=True)
    partitions = [
        (str(topics[t]), int(n)) for t, n in zip(pairs // span, pairs % span, strict=True)
    ]
    series = arrivals(offsets, set(partitions))
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(partitions) + 1))
    offset = copies["offset"].to_numpy(dtype=np.int64)
    ever = np.iinfo(np.int64).max
    for code, (topic, partition) in enumerate(partitions):
        found = series.get((str(topic), int(partition)))
        if found is None:
            continue
        where = order[bounds[code] : bounds[code + 1]]
        seen = np.full(len(where), ever, dtype=np.int64)
        at, resolution, _ = found.readable_at(offset[where], seen)
        when[where], width[where] = at, resolution
    return when, width


def _latest_events(
    copies: pd.DataFrame, timeline: pd.DataFrame, groups: Mapping[str, str], slack_ns: float
) -> pd.Series:
    """Per extra copy: the latest event of its pipeline's group that may lie between the
    copy before it and itself ('' when none): after the earlier copy could have arrived,
    and detected (sampled) no later than one sampling interval after this one could have."""
    named = pd.Series("", index=copies.index, dtype=object)
    for pipeline, rows in copies.groupby("pipeline", sort=False):
        group = groups.get(str(pipeline))
        if not group:
            continue
        mine = timeline[timeline["group_id"] == group]
        if mine.empty:
            continue
        times = mine["at_ns"].to_numpy(dtype=np.int64)
        latest = rows["arrived_hi"] + slack_ns
        after = rows["previous_lo"]
        known = latest.notna() & after.notna()
        index = np.searchsorted(times, latest[known].to_numpy(), side="right") - 1
        usable = (index >= 0) & (times[np.clip(index, 0, None)] > after[known].to_numpy())
        # Each event told once, then picked by position: copies far outnumber events.
        texts = np.asarray(
            [
                f"after {e} of group {group} at {pd.Timestamp(t, tz='UTC'):%H:%M:%S} ({d})"
                for e, t, d in zip(mine["event"], mine["at_ns"], mine["detail"], strict=True)
            ],
            dtype=object,
        )
        named[known[known].index[usable]] = texts[index[usable]]
    return named


def _text(numbers: pd.Series) -> pd.Series:
    return numbers.astype("Int64").astype(str)


def _session(pid: pd.Series, epoch: pd.Series) -> pd.Series:
    return "producer id " + _text(pid) + " epoch " + _text(epoch)


def _rules(extra: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(cause, evidence) of each extra copy a dgm header did not explain (see module)."""
    pid, was_pid = extra["producer_id"], extra["previous_producer_id"]
    known = pid.notna() & was_pid.notna()
    same_session = known & (pid == was_pid) & (extra["producer_epoch"] == extra["previous_epoch"])
    seq, was_seq = extra["producer_sequence"], extra["previous_sequence"]
    same_send = same_session & seq.notna() & (seq == was_seq)
    new_session = known & ~same_session
    sink = extra["pipeline"].notna()
    event = extra["event"]
    has_event = event != ""
    unstamped = extra["producer_id"].isna() & extra["previous_producer_id"].isna()
    same_time = extra["timestamp"].notna() & (extra["timestamp"] == extra["previous_timestamp"])
    now = _session(pid, extra["producer_epoch"])
    was = _session(was_pid, extra["previous_epoch"])
    restarted = "the writer's session changed: " + was + " -> " + now
    retry, reprocessing = DuplicateCause.PRODUCER_RETRY.value, DuplicateCause.REPROCESSING.value
    choices = [
        (same_send, retry, ONE_SEND + now + " sequence " + _text(seq)),
        (sink & has_event & new_session, reprocessing, event + "; " + restarted),
        (sink & has_event, reprocessing, event),
        (sink & new_session, reprocessing, restarted),
        (new_session, retry, "resent by a new producer session: " + was + " -> " + now),
        (~sink & unstamped & same_time & ~has_event, retry, RESENT_BATCH),
    ]  # fmt: skip
    cause = np.select([c for c, _, _ in choices], [k for _, k, _ in choices], _UNKNOWN)
    headers = np.where(known, "one producer session", "batch headers not read")
    seen = np.where(unstamped, "no producer id in either copy's batch", headers)
    evidence = np.select(
        [c for c, _, _ in choices],
        [pd.Series(e, index=extra.index).to_numpy(dtype=object) for _, _, e in choices],
        pd.Series(seen, index=extra.index).add(", no group event between").to_numpy(dtype=object),
    )
    return cause, evidence


def replay_runs(extra: pd.DataFrame, min_run: int = 3) -> pd.Series:
    """Per extra copy: the replay run it belongs to ('' when none), named with its ranges.
    A run: extra copies at consecutive offsets of one sink partition whose joined source
    records lie in one source partition at increasing offsets, at least `min_run` long."""
    keyed = extra[extra["source_offset"].notna()].sort_values(
        ["pipeline", "topic", "partition", "offset"]
    )
    named = pd.Series("", index=extra.index, dtype=object)
    if keyed.empty:
        return named
    same = ["pipeline", "topic", "partition", "source_topic", "source_partition"]
    previous = keyed.groupby(same, dropna=False)[["offset", "source_offset"]].shift(1)
    continues = (keyed["offset"] == previous["offset"] + 1) & (
        keyed["source_offset"] > previous["source_offset"]
    )
    # A run is a block of consecutive rows in this order (a continuing copy is the row right
    # after the one it continues: offsets are unique in a sink partition), told by position.
    starts = np.flatnonzero(~continues.to_numpy())
    ends = np.append(starts[1:], len(keyed)) - 1
    lengths = ends - starts + 1
    long = lengths >= min_run
    starts, ends, lengths = starts[long], ends[long], lengths[long]
    first, last = keyed.iloc[starts], keyed.iloc[ends]
    texts = [
        f"replay run: source {topic}/{int(partition)} offsets {int(begin)}-{int(end)} "
        f"rewritten at {sink}/{int(sink_partition)} offsets {int(at)}-{int(to)} ({n} records)"
        for topic, partition, begin, end, sink, sink_partition, at, to, n in zip(
            first["source_topic"], first["source_partition"], first["source_offset"],
            last["source_offset"], first["topic"], first["partition"], first["offset"],
            last["offset"], lengths, strict=True,
        )
    ]  # fmt: skip
    spans = [np.arange(s, e + 1) for s, e in zip(starts, ends, strict=True)]
    rows = np.concatenate(spans) if spans else np.array([], dtype=np.int64)
    named[keyed.index[rows]] = np.repeat(np.asarray(texts, dtype=object), lengths)
    return named


def explained(
    duplicates: pd.DataFrame,
    producers: pd.DataFrame,
    timeline: pd.DataFrame,
    offsets: pd.DataFrame,
    groups: Mapping[str, str],
    slack_s: float,
) -> pd.DataFrame:
    """`duplicates` (the published table's rows) with producer_id, producer_epoch,
    producer_sequence (from `producers`: copy_producers' rows by topic, partition, offset),
    arrived_at and arrival_resolution_s, and the cause and evidence of the copies no dgm
    header explained. `groups`: pipeline -> its consumer group; `slack_s`: the collectors'
    sampling interval (an event is sampled up to one interval after it happened)."""
    if duplicates.empty:
        return duplicates
    where = ["topic", "partition", "offset"]
    found = producers[[*where, "producer_id", "producer_epoch", "producer_sequence"]]
    rows = duplicates.drop(columns=["producer_id", "producer_epoch", "producer_sequence"],
                           errors="ignore").merge(found, on=where, how="left")  # fmt: skip
    rows.index = duplicates.index
    when, width = copy_arrivals(rows, offsets)
    arrived = pd.to_datetime(pd.Series(when, index=rows.index), utc=True)
    rows["arrived_at"] = arrived.dt.floor("us")  # the published precision
    rows["arrival_resolution_s"] = width / 1e9
    evidence = rows["cause"].map(HEADER_EVIDENCE)
    evidence[rows["cause"] == DuplicateCause.PRODUCER_RETRY.value] = (
        "one send (dgm-producer, dgm-seq) at two offsets"
    )
    evidence[rows["cause"] == DuplicateCause.REPROCESSING.value] = (
        "one source record (dgm-src) copied twice"
    )
    rows["evidence"] = evidence
    open_ = rows[rows["cause"] == _UNKNOWN].sort_values([*_COPY, "copy_number"])
    if open_.empty:
        return rows
    previous = open_.groupby(_COPY, dropna=False).shift(1)
    extra = open_.assign(
        previous_producer_id=previous["producer_id"],
        previous_epoch=previous["producer_epoch"],
        previous_sequence=previous["producer_sequence"],
        previous_timestamp=previous["timestamp"],
        arrived_hi=pd.Series(when + width, index=rows.index)[open_.index],
        previous_lo=(pd.Series(when - width, index=rows.index)[open_.index]).groupby(
            [open_[k] for k in _COPY], dropna=False).shift(1),
    )[open_["copy_number"] > 1]  # fmt: skip
    extra["event"] = _latest_events(extra, timeline, groups, slack_s * 1e9)
    cause, told = _rules(extra)
    # A run is a processor's replay: sink copies only, and never one send at two offsets
    # (a resent batch of a processor without idempotence reads as a run too: the log
    # cannot tell them apart, docs/design.md).
    exact = pd.Series(told, index=extra.index).str.startswith(ONE_SEND).to_numpy()
    candidates = extra["pipeline"].notna().to_numpy() & ~exact
    runs = replay_runs(extra[candidates]).reindex(extra.index, fill_value="").to_numpy()
    in_run = runs != ""
    weak = (cause == _UNKNOWN) | (told == RESENT_BATCH)
    kept = np.where(weak, "", "; " + told.astype(object))
    told = np.where(in_run, runs + kept, told)
    cause = np.where(in_run, DuplicateCause.REPROCESSING.value, cause)
    rows.loc[extra.index, "cause"] = cause
    rows.loc[extra.index, "evidence"] = told
    # The first copy reads as the id's second: the cause of the id's first extra copy.
    second = rows.loc[extra.index][extra["copy_number"] == 2].set_index(_COPY)[
        ["cause", "evidence"]
    ]
    firsts = open_[open_["copy_number"] == 1]
    named = firsts[_COPY].merge(second.reset_index(), on=_COPY, how="left")
    rows.loc[firsts.index, "cause"] = named["cause"].fillna(_UNKNOWN).to_numpy()
    rows.loc[firsts.index, "evidence"] = named["evidence"].to_numpy()
    return rows
