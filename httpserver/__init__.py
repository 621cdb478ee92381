"""HTTP servers inside a service's own event loop (uvicorn): entered once listening, stopped
on the way out (``server``), and the ``/metrics`` listener of the services that serve no HTTP
(``metrics``). Imports nothing of Jetyard's, so every layer that runs a process may use it."""
