"""The REST front process: listeners served by a child process with its own GIL.

``parent`` (``FrontedRestServer``, in the daemon) starts and supervises ``child`` (the front
process); ``protocol`` is what passes between them; ``mirror`` is the copy of the worker's
states the child answers status requests from.
"""
