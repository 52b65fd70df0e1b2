"""Benchmarks, run by hand (never as timed assertions in the test suite). See bench/README.md."""
