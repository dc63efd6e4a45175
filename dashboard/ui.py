"""What every page shares: freshness, the verdict badge, empty and error states, formats."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import queries
from dgm.config.problems import ConfigError
from dgm.contracts.published import stale_after_s
from dgm.contracts.vocabulary import Achieved
from dgm.util.progress import read_progress

ENV_REFRESH = "DGM_DASHBOARD_REFRESH_S"

RUN_HINT = (
    "Run the collectors and the analysis: `dgm collect` and `dgm analyze` "
    "(or `dgm demo` for a ready-made example), then press Retry."
)


def refresh_every() -> timedelta | None:
    """How often pages re-read the published file (DGM_DASHBOARD_REFRESH_S; 0 = never)."""
    try:
        seconds = float(os.environ.get(ENV_REFRESH) or 30)
    except ValueError:
        seconds = 30  # a typo in the variable must not take the dashboard down
    return timedelta(seconds=seconds) if seconds > 0 else None


@dataclass(frozen=True)
class Freshness:
    finished_at: datetime | None
    last_sample_at: datetime | None
    stale: bool
    reasons: tuple[str, ...] = field(default=())
    # "analysis running ..." while a cycle is under way (audit progress newer than the
    # publication), else None.
    running: str | None = None


def _when(value: object) -> datetime | None:
    if value is None or (not isinstance(value, datetime) and pd.isna(value)):  # type: ignore[arg-type]
        return None
    stamp: datetime = pd.Timestamp(value).to_pydatetime()  # type: ignore[arg-type]
    return stamp


def freshness(now: datetime | None = None) -> Freshness:
    """Is the published run recent enough to be believed? Raises the queries' errors."""
    now = now or datetime.now(UTC)
    settings = queries.config()
    runs = queries.runs()
    if runs.empty:
        return Freshness(None, None, True, ("the published file has no run",))
    finished = _when(runs.iloc[0]["finished_at"])
    started = _when(runs.iloc[0]["started_at"])
    sample = _when(runs.iloc[0]["last_sample_at"])
    analysis_s = settings.analysis.interval_s
    # Analyses finish one cycle's work plus one interval apart: behind only past a few of
    # those (the threshold `dgm verdicts` and the exporter use too).
    cycle_s = (finished - started).total_seconds() if finished and started else 0.0
    limit = timedelta(seconds=stale_after_s(analysis_s, cycle_s))
    running = _running(Path(settings.state_dir), finished, now)
    reasons = []
    if finished is None or now - finished > limit:
        reasons.append(
            f"the last analysis finished {ago(finished, now)} (one takes about "
            f"{cycle_s:.0f} s, every {analysis_s:g} s): is `dgm analyze` running?"
            + (f" ({running})" if running else "")
        )
    # The analysis can only see samples up to its own start, so allow one analysis interval.
    sample_limit = limit + timedelta(seconds=analysis_s + settings.collectors.interval_s)
    if sample is None:
        reasons.append("the last analysis read no collector samples: is `dgm collect` running?")
    elif now - sample > sample_limit:
        reasons.append(
            f"the newest collector sample is from {ago(sample, now)}: is `dgm collect` running?"
        )
    return Freshness(finished, sample, bool(reasons), tuple(reasons), running)


def _running(state_dir: Path, finished: datetime | None, now: datetime) -> str | None:
    """What the analysis cycle under way is doing, from the audit progress it writes after
    the last publication; None when no cycle shows signs of life (a minute without news)."""
    state = read_progress(state_dir)
    if state is None or (finished is not None and state.updated_at <= finished):
        return None
    if (now - state.updated_at).total_seconds() > 60:
        return None
    if state.phase in ("reading", "writing"):
        share = 100 * state.offsets_done / state.offsets_total if state.offsets_total else 100.0
        doing = f"audit {state.phase}, {share:.0f}%"
    else:
        doing = "analyzing and publishing"
    return f"analysis running: {doing}; last finished {ago(finished, now)}"


def audit_progress_line(now: datetime | None = None) -> str | None:
    """The latest audit's progress as `dgm analyze` wrote it (dgm.util.progress), or None.

    Shown under the freshness: a first audit of a large backlog can run for minutes before
    anything is published, and this says how far it is and when it should end."""
    state = read_progress(Path(queries.config().state_dir))
    if state is None:
        return None
    share = 100 * state.offsets_done / state.offsets_total if state.offsets_total else 100.0
    updated = ago(state.updated_at, now)
    if state.phase in ("reading", "writing"):
        eta = "?" if state.eta_s is None else f"{state.eta_s:.0f} s"
        return (
            f"Audit {state.phase}: {state.records_done:,} records, {state.offsets_done:,} of "
            f"{state.offsets_total:,} offsets ({share:.0f}%), {state.rate:,.0f} records/s, "
            f"ETA {eta} (updated {updated})"
        )
    return (
        f"Last audit {state.phase}: {state.records_done:,} records at "
        f"{state.rate:,.0f} records/s ({updated})"
    )


def ago(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return "never"
    return f"{span((now or datetime.now(UTC)) - when)} ago"


def span(length: timedelta) -> str:
    """A length of time as people read it: `42 s`, `3.5 min`, `2.1 h`, `1.0 d`."""
    seconds = length.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{max(seconds, 0):.0f} s"


def seconds(value: float | None) -> str:
    """A measured number of seconds: `0.42 s`, `12.5 s`; under 10 ms in ms (`8.3 ms`), under
    10 µs in µs (`1.19 µs`, not `1.19e-06 s`); from a minute on as `span` tells it; `?` when
    unknown."""
    if value is None or pd.isna(value):
        return "?"
    if value >= 60:
        return span(timedelta(seconds=float(value)))
    size = abs(value)
    if 0 < size < 1e-5:
        return f"{value * 1e6:.3g} µs"
    if 0 < size < 1e-2:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def when(moment: datetime | None) -> str:
    """`2026-11-23 08:01:02 UTC (26 s ago)`, or `never` (None, or a null cell: pandas' NaT)."""
    if moment is None or pd.isna(moment):
        return "never"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC ({ago(moment)})"


def stale_banner() -> bool:
    """A red STALE banner at the top of a page when the data is old; True when stale."""
    fresh = freshness()
    if fresh.stale:
        st.error(
            "**STALE DATA**: what follows is not the current state.\n\n- "
            + "\n- ".join(fresh.reasons),
            icon=":material/warning:",
        )
    return fresh.stale


_SOLID = {"green": "#1b7f3b", "red": "#c62828", "gray": "#6b7280", "orange": "#d97706"}


def badge_label(meets: object, achieved: str, stale: bool) -> tuple[str, str]:
    """(label, color): MEETS green, VIOLATES red, INSUFFICIENT EVIDENCE gray; stale data
    adds (STALE) and never looks healthy: a green MEETS turns orange."""
    if achieved == Achieved.INSUFFICIENT_EVIDENCE or meets is None or pd.isna(meets):  # type: ignore[arg-type]
        label, color = "INSUFFICIENT EVIDENCE", "gray"
    elif bool(meets):
        label, color = "MEETS", "green"
    else:
        label, color = "VIOLATES", "red"
    if stale:
        label, color = f"{label} (STALE)", ("orange" if color == "green" else color)
    return label, color


def verdict_badge(meets: object, achieved: str, stale: bool) -> None:
    """MEETS (green) / VIOLATES (red) / INSUFFICIENT EVIDENCE (grey); never green when stale."""
    label, color = badge_label(meets, achieved, stale)
    st.markdown(
        f'<span data-verdict="{label}" data-color="{color}" style="background:{_SOLID[color]};'
        "color:white;font-weight:700;font-size:1.05rem;letter-spacing:0.04em;"
        f'padding:0.3rem 0.9rem;border-radius:0.4rem;white-space:nowrap">{label}</span>',
        unsafe_allow_html=True,
    )


def rate(value: object) -> str:
    if value is None or pd.isna(value):  # type: ignore[arg-type]
        return "n/a"
    number = float(value)  # type: ignore[arg-type]
    return "0%" if number == 0 else f"{number:.3%}" if number < 0.01 else f"{number:.2%}"


def count(value: object) -> str:
    if value is None or pd.isna(value):  # type: ignore[arg-type]
        return "n/a"
    return f"{int(value):,}"  # type: ignore[call-overload]


def duration_ms(value: object) -> str:
    if value is None or pd.isna(value):  # type: ignore[arg-type]
        return "n/a"
    seconds = float(value) / 1000  # type: ignore[arg-type]
    if not math.isfinite(seconds):
        return "n/a"
    return span(timedelta(seconds=seconds))


def guarded(render: Callable[[], None], where: str) -> None:
    """Run a page body; a missing or unreadable file or a bad config is a message, no traceback."""
    try:
        render()
    except queries.NoDatabase as missing:
        st.info(
            f"**No analysis published yet** (looked for `{missing}`).\n\n{RUN_HINT}",
            icon=":material/hourglass_empty:",
        )
        retry(where)
    except queries.UnreadableDatabase as error:
        st.error(
            f"**The published database cannot be read.** It may be locked by another "
            f"process, corrupt, or from another dgm version.\n\n`{error}`\n\n"
            "The next `dgm analyze` run replaces it; press Retry then.",
            icon=":material/error:",
        )
        retry(where)
    except ConfigError as error:
        st.error(f"**dgm.toml is invalid**: {error}", icon=":material/error:")
        retry(where)


def retry(where: str) -> None:
    """A Retry button (keyed by `where`) that reads every file again."""
    if st.button("Retry", key=f"retry-{where}", type="primary"):
        st.cache_data.clear()
        st.rerun()


def run_page(render: Callable[[], None], where: str) -> None:
    """Render a page body in a fragment that re-reads the published file every refresh."""

    def checked() -> None:
        queries.check()  # a file without the contract's tables fails here, as one message
        render()

    @st.fragment(run_every=refresh_every())
    def body() -> None:
        guarded(checked, where)

    body()


def pick_from_url(
    label: str, options: list[str], param: str, help: str | None = None
) -> str | None:
    """A selectbox that opens at the URL's `?param=NAME` (a shared link, an alert's link) and
    writes a choice back into the URL; a NAME that is not among `options` is said, and the
    first option is shown. The widget keeps its own state (a choice survives the reruns it
    causes) and follows the URL only when the URL names something it did not write."""
    wanted = st.query_params.get(param)
    if wanted and wanted not in options:
        st.warning(f"`{wanted}` is not in the published tables; pick another.")
    key, written = f"pick-{param}", f"pick-{param}-written"
    if wanted in options and (
        st.session_state.get(written) != wanted or key not in st.session_state
    ):
        st.session_state[key] = wanted
    elif st.session_state.get(key) not in options:
        st.session_state.pop(key, None)
    picked: str | None = st.selectbox(label, options, key=key, help=help)
    if picked is not None:
        st.session_state[written] = picked
        if picked != wanted:
            st.query_params[param] = picked
    return picked


def pick_or_say(
    label: str, options: list[str], param: str, *, none: str, help: str | None = None
) -> str | None:
    """`pick_from_url` over `options`; with no options, the line `none` says why (and None)."""
    if not options:
        st.info(none)
        return None
    return pick_from_url(label, options, param, help=help)
