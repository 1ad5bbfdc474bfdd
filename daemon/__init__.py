"""connectd: a Kafka Connect worker for sink connectors on asyncio, with killable executors."""

__version__ = "0.1.0"
