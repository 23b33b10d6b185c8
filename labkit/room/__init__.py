"""A workshop room on JupyterHub: one hub, one lab container per participant, a teacher's board.

labkit room up --participants 20      # the hub answers when this returns; room/room.json has its url
labkit room status | grades | down
"""

from .settings import RoomSettings

__all__ = ["RoomSettings"]
