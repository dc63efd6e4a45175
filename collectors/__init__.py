"""Collectors: light samplers of cluster metadata (offsets, LSO, groups, transactions)."""
