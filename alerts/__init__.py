"""Alert rules over the published analysis: evaluated after every run, notified, remembered.

rules (what a rule says, validation) -> metrics (values read from dgm.duckdb) -> evaluate
(the pure state machine) -> store (alerts.sqlite: page rules, states, history, outbox) ->
notify (log line, webhook with retries); run is the entry point (`dgm alerts` is the shell's).
"""
