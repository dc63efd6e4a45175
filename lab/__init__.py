"""The pipeline lab: stamped producers, reference pipelines and real faults, with a ledger of
the truth so that every verdict dgm prints can be checked against what really happened."""
