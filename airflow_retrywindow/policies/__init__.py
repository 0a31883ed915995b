"""The worker side: ``RetryWindowPolicy`` at failure time, the retry-start check in
front of every try, how failures are classified, the evidence they leave, and the
cluster policy and ``check_dag`` that refuse what the gate cannot express.
"""
