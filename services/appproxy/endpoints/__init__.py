"""Model-serving endpoints at the app proxy (``/e/<name>/<path>``): the endpoint table folded
from ``ev.endpoint.*`` (``table.py``), who may pass (``access.py``), which replica takes a
request (``balance.py``), holding and waking (``wake.py``), the forwarding itself
(``forward.py``) and the load reports on ``jy.serving.load.<proxy id>`` (``load_reports.py``).
"""
