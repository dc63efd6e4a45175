"""Embedded Apache Kafka (KRaft) for tests, CI, the lab and the demo: a tool on the core, used by
the shell and the lab, never by the core or the stages (docs/design.md, "Layout")."""
