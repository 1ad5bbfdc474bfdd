"""The one sink task of every table format, and what the formats share.

``task`` (``TableSinkTask``: the lifecycle, holding a format), ``opening`` (the bounded open),
``buffer`` (what is not written yet), ``writer`` (one write in flight, ``FlushPolicy``),
``format`` (``TableFormat`` and its ``TableHandle``: the guarantees a format gives),
``jobtables`` (a format reached through executor jobs: Delta, Iceberg), ``connector`` (the
connector: the offsets API and the pre-creation check through the format), ``settings`` (the
keys every table sink shares, declared once), ``location`` (a ``path`` as a local directory
or a Hadoop URI), ``schema`` (a batch against a table's columns), ``owners`` (another
connector's partitions as a problem), ``names`` (table names for Spark's parser), ``jobs``
(what every format's executor jobs share; executor processes import it and ``names``: they
need nothing of the task side).
"""
