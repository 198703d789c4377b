"""Process supervision: one case in worker subprocesses, slots, the timing gate, spares, deaths, leftovers."""
