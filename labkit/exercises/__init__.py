"""Exercise graders, one module per lab (``labkit.exercises.lab00`` …); each returns a CheckResult."""
