"""MirrorMaker 2 (Kafka's own connect-mirror, dedicated mode) between two clusters, for the lab."""
