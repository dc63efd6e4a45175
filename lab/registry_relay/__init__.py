"""An enricher that re-serializes: reads records of one schema version (Avro or JSON Schema)
through a schema registry, writes them with a newer version (an added field), at-least-once;
SIGKILLed and restarted by `run.py`."""
