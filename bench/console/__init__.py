"""The web console at scale (``python -m bench.console``): the scenario and what it reports
(``__main__``), the stack it runs on (``stack``), the sessions it sends (``workload``), GraphQL
(``gql``), the browser (``browser``) and status changes in open pages (``changes``)."""
