"""Reference processors, one per delivery semantic: consume -> upper-case -> sink.

Each runs as its own OS process (`python -m lab.processors --mode MODE --settings-json
JSON`) so that a crash is a real SIGKILL. Each announces its phases on stdout
(`lab.processors.announce`), which lets the supervisor aim its kills.
"""
