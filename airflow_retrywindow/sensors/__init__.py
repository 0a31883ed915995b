"""Sensors of the retry window gate."""
