"""The course around the lab: the reference models and their checks, the workshop's commands
(check, reset, plan), the day's plan and the tour of every lesson."""
