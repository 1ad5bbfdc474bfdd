"""The runtime: connectors and tasks, the task coroutine, the stop sequence, states, restarts."""
