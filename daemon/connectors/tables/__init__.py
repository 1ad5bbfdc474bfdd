"""What the table-format sinks (DeltaSink, IcebergSink) share: settings, the task (buffer,
writer, fencing and read-back through the format's jobs), the connector's offsets API."""
