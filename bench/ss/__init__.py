"""Helpers of bench/ss_bench.py (Spark Structured Streaming against connectd)."""
