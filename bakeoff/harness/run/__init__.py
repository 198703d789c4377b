"""Orchestration: plan a run, record it, hand its cases to an executor, write each record as its case ends."""
