"""`dgm run` and `dgm demo`: the whole system, started and stopped as one."""
