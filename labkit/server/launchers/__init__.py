"""One module per way of running Triton; each defines one TritonServer subclass whose ``kind`` is
the module's name. A new launcher is one new file here: ``labkit.start(server="<name>")`` finds it."""
