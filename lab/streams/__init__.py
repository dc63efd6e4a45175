"""A Kafka Streams application (Kafka's own library, not written against dgm) run through
SIGKILLs: its jars pinned like the broker's, its source compiled at first use."""
