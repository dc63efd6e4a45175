"""Configuration: dgm.toml's schema, one module per section; its loader; its editing."""
