"""Pool breakers: a pool named in ``[retry_window] breaker_pools`` holds every task in it
while the dependency it stands for is down, and follows what it serves while it is up in
part, by its slots alone (see ``docs/dependencies.md``).

Pure parts: :mod:`.settings` (which pools, and how each is run) and :mod:`.law` (what a
round does to a pool's slots). :mod:`.control` runs a round through the REST API, for the
controller's trigger (:mod:`airflow_retrywindow.triggers.pool_breaker`) and task
(:mod:`airflow_retrywindow.operators.pool_breaker`); :mod:`.trip` opens a breaker from a
failing try, before its slot is freed.
"""
