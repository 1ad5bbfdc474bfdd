"""Errant records and the dead-letter queue.

``policy`` applies ``errors.tolerance`` / ``errors.log.*`` to the records a task could not take;
``index`` is the bookkeeping that gives each dead letter exactly once (what a dead letter
carries, which ones are in the topic); ``topic`` is the Kafka I/O (create, produce, read back).
"""
