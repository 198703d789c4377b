"""Planning: from a validated config to self-contained cases (from_config.py, workloads.py, cases.py)."""
