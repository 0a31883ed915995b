"""Airflow hooks of the provider: reading another run through Airflow's REST API."""
