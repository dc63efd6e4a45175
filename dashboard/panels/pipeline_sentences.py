"""What the overview says of one pipeline, as text from its verdict row (no Streamlit): the
claim, the evidence paragraph, the producer stage, the clusters. Missing columns (a
publication of an older dgm) read as nothing to say."""

from __future__ import annotations

from typing import Any

import pandas as pd

from dashboard import ui
from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.contracts.vocabulary import Evidence

EVIDENCE: dict[str, str] = {
    Evidence.TESTED: "**Tested**: {faults} fault(s) (rebalances, restarts, new producer sessions, "
    "outages) observed while the {checked} checked records flowed.",
    Evidence.UNTESTED: "**Untested**: no fault was seen while the {checked} checked records "
    "flowed. Zero anomalies with no fault seen is weaker evidence than zero anomalies across "
    "crashes and rebalances.",
    Evidence.NONE: "**No evidence**: no checked record's fate is known yet.",
}


def counted(v: pd.Series, name: str) -> int:
    """A count column of the row; 0 when absent or null."""
    value = v.get(name)
    return 0 if value is None or pd.isna(value) else int(value)


def topics(value: Any) -> list[str]:
    return [] if value is None else [str(t) for t in value]


def claim_text(row: pd.Series) -> str:
    """'deadline (max_delay 5m)': the verdict's claim and its detail ('' from a publication
    of an older dgm, which had no claim column)."""
    claim, detail = row.get("claim"), row.get("claim_detail")
    if claim is None or pd.isna(claim):
        return ""
    return f"{claim} ({detail})" if detail is not None and not pd.isna(detail) else str(claim)


def evidence(v: pd.Series) -> str:
    """The card's paragraph: the evidence, the claim, late records, torn commits and order,
    and the sample the counts come from."""
    said = str(v["evidence"]) if pd.notna(v["evidence"]) else Evidence.NONE.value
    return (
        EVIDENCE.get(said, "**Evidence**: {evidence}").format(
            faults=ui.count(v["faults_observed"]),
            checked=ui.count(v["records_checked"]),
            evidence=said,
        )
        + (f" Claim: **{claim_text(v)}**." if claim_text(v) else "")
        + _late(v)
        + _torn_and_order(v)
        + _sampled(v)
    )


def _late(v: pd.Series) -> str:
    late = counted(v, "late_records")
    if late == 0:
        return ""
    return (
        f" **{ui.count(late)}** late records: their sink copy came later than max_delay "
        "(delivered, not lost)."
    )


def _torn_and_order(v: pd.Series) -> str:
    """The torn commits among the losses and the records out of order, when there are any."""
    said = ""
    torn = counted(v, "torn_commits")
    if torn:
        said += (
            f" **{ui.count(torn)}** of the lost records are torn commits: their sink copy "
            "exists only in aborted transactions, yet the claim moved past them (a "
            "transaction protocol failure)."
        )
    producer, sink = counted(v, "producer_out_of_order"), counted(v, "sink_out_of_order")
    if producer or sink:
        said += (
            f" Order, beside the verdict: **{ui.count(producer)}** source records behind a "
            f"higher dgm-seq of their producer session, **{ui.count(sink)}** sink records "
            "behind a higher offset of their source partition."
        )
    return said


def _one_in(v: pd.Series) -> int:
    """1 in how many ids the pipeline's counts keep (1 for a publication without samples;
    docs/design.md, "Sampled pipelines")."""
    one_in = v.get("sample_one_in")
    return 1 if one_in is None or pd.isna(one_in) else int(one_in)


def kept(v: pd.Series) -> str:
    """What a rate's help adds for a sampled pipeline."""
    one_in = _one_in(v)
    return "" if one_in == 1 else f", counted over 1 in {one_in} message ids (95% interval)"


def _sampled(v: pd.Series) -> str:
    one_in = _one_in(v)
    if one_in == 1:
        return ""
    return (
        f" **Sampled**: the counts are those of 1 in {one_in:,} message ids, kept by their "
        f"hash; the rates are estimates, with 95% intervals: duplicate rate "
        f"{_interval(v, 'duplicate_rate')}, loss rate {_interval(v, 'loss_rate')}. Sequence "
        "gaps and order are not looked for."
    )


def _interval(v: pd.Series, rate: str) -> str:
    low, high = v.get(f"{rate}_low"), v.get(f"{rate}_high")
    return f"{ui.rate(low)} to {ui.rate(high)}"


def clusters(v: pd.Series) -> str:
    """Where the source and the sink live, once a pipeline leaves the default cluster
    (docs/design.md, "Several clusters"); nothing for a single-cluster setup."""
    source, sink = v.get("source_cluster"), v.get("sink_cluster")
    known = [c for c in (source, sink) if c is not None and not pd.isna(c)]
    if all(c == DEFAULT_CLUSTER for c in known):
        return ""
    return f" · cluster **{source}** → **{sink}**"


def stages(v: pd.Series) -> str | None:
    """The producer stage and the end-to-end semantic beside the pipeline's own verdict;
    None from a publication without them."""
    producer = v.get("producer_achieved")
    if producer is None or pd.isna(producer):
        return None
    chain = " → ".join(topics(v.get("chain"))) or str(v["pipeline"])
    gaps = v.get("producer_sequence_gaps")
    missing = (
        "its losses not measured: its producers stamp no dgm-seq"
        if gaps is None or pd.isna(gaps)
        else f"{ui.count(gaps)} records missing from its producers' sequences"
    )
    return (
        f"**Producer stage**: {producer} ({ui.rate(v['producer_duplicate_rate'])} extra copies "
        f"already in the source, {missing}) · **end to end** ({chain}): "
        f"{v['end_to_end_achieved']}"
    )
