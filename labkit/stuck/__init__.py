"""A stuck model explains itself: where its code is right now, and one call to get unstuck.

    report.where_stuck(server, model)   # text: the live model.py or C++ cell frames of the model
    report.timeout_error(...)           # the RequestTimeoutError a request (or a load run) raises
    unstick.free(server, model)         # end the stuck request inside model.py; the server reloads
    report.debug_tools(server)          # whether py-spy and eu-stack are there, and how to get them

Nothing is imported here, so that ``labkit.server`` can use ``labkit.stuck.debuggers`` without a cycle.
"""

__all__ = ["debuggers", "native_stack", "python_stack", "report", "stuck_load", "stuck_server", "unstick"]
