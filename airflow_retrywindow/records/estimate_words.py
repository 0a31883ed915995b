"""The words a decision record stores for where each estimate value came from.

The gate writes them (:mod:`airflow_retrywindow.gate.targets`) and
:mod:`~airflow_retrywindow.records.estimate_source` reads them back, so they are
defined here, below both: a reader of stored records never imports the gate.
"""

#: the target's own ``RetryWindowPolicy``
POLICY = "policy"
#: the gate's (or the sensor's) own arguments
GATE = "gate"
#: the gate's arguments and the target's policy, giving the same value
AGREED = "gate and policy"
#: a ``Work.override`` of the gate; its reason follows
OVERRIDE = "gate override: "
#: the other targets' policies
OTHER_POLICIES = "other targets' policies"
