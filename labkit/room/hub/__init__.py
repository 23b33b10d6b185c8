"""The room's JupyterHub and its life: the hub's configuration (``hubconfig``), its process (``process``), the
records of the room's own processes (``processes``), `room up / status / down` (``lifecycle``) and the
participant image (``lab_image``)."""
