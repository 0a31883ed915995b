"""Operators of the retry window gate."""
