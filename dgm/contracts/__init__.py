"""The contracts stages exchange: samples, fingerprints, published tables, headers, ids."""
