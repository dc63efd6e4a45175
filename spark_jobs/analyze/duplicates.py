"""Duplicates and their causes: the rules, for the engine (per_id) to apply.

The words are docs/design.md's: a **duplicate** is a committed record whose message id already
appeared at an earlier committed offset in the same topic; the duplicate rate is extra
copies / distinct ids. Across partitions "earlier" means earlier by (timestamp, partition,
offset), which is also how the first copy is chosen. Aborted and unidentified records are
never copies; they are counted on their own.
"""

from __future__ import annotations

# Causes, in precedence order: when several apply to one id, the first one listed names it.
# - aborted read: the id should not be in the sink at all (the source holds it only in
#   aborted transactions), whatever else then copied it;
# - producer retry: the very same send (producer session and dgm-seq) sits at two offsets;
#   a retried send also repeats its dgm-src, so this must win over reprocessing;
# - reprocessing: the same source record (dgm-src) was processed into two sink copies;
# - upstream: only id-level evidence that the source itself held the id twice.
ABORTED_READ, PRODUCER_RETRY, REPROCESSING, UPSTREAM = (
    "aborted read",
    "producer retry",
    "reprocessing",
    "upstream",
)
UNKNOWN = "unknown"  # no header evidence for any cause (e.g. a pipeline stamping nothing)
CAUSES = (ABORTED_READ, PRODUCER_RETRY, REPROCESSING, UPSTREAM)
# A cause's evidence, as per_id.causes reads it: the sink-side causes are values repeated
# among an id's copies in one topic (a send: producer and dgm-seq; a source record: dgm-src);
# the source-side ones count the id's records in the pipeline's source topics (upstream: two
# committed; aborted read: none committed, some aborted).
