"""The room on Kubernetes: Zero to JupyterHub values (``values``), the board as the hub pod's second container
(``board_container``) and a grader run as a bare Pod (``pods``)."""
