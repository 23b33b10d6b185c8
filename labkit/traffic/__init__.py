"""Load generation: many requests (or sequences of them) at once from many clients, as a load
test sends them. Not model loading, which is the server's (``lab.load``)."""

__all__ = ["generator", "sequences"]
