"""A gated task's pool is its dependency: while that pool's tasks fail together,
their retries are held at their start instead of spent into the outage.

Pure parts (no Airflow): :mod:`.settings` (what ``[retry_window]`` says of each pool),
:mod:`.fleet` (the pool's task instances as read, and the dependency's state
worked out from them) and :mod:`.admission` (whether one starting retry runs, probes,
waits or is refused). :mod:`.pool_read` reads a pool's task instances through the
REST API, for the retry-start check and the gate alike. :mod:`.check` is the thin
Airflow layer: it reads the pool at a retry's start and acts on the admission. See
``docs/dependencies.md``.
"""
