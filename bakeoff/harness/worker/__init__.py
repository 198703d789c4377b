"""The worker: what runs in a case's subprocess (entry.py is the module the supervisor starts)."""
