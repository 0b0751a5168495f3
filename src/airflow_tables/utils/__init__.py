"""What the operators and the sensor share: the task mixin, the waiting glue, the asset events and lineage.

Below the tasks and above the trigger and the hook: nothing here imports an operator or a sensor.
"""
