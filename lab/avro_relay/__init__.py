"""An enricher that re-serializes: reads Avro records of one schema version through a schema
registry, writes them with a newer version (an added field), at-least-once; SIGKILLed and
restarted by `run.py`."""
