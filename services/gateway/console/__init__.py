"""The web console: static pages (HTML, native ES modules, hand-written CSS) that the gateway
serves at ``/console/`` and that talk to ``/graphql`` like any client. ``docs/console.md``
says why it is built this way and how to add a page."""
