"""The teacher's board, a JupyterHub service (``python -m labkit.room.board.service``): the saves it sees
(``notebook_sources``, ``scanner``), the queue that has them judged (``watch``), the marks it keeps
(``progress``) and the page that shows them (``page``)."""
