"""Real time and the model's seconds: the clock, deadlines, the work of one attempt,
Airflow's retry settings, the fixtures built from them, and the words for a decision.

Pure: nothing here imports Airflow.
"""
