"""Small utilities: errors, durable files, ports, progress, signals, waiting, command lines."""
