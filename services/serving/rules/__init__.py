"""The serving controller's pure rules: health (``health``), autoscaling (``scaling``), replica
counts and rollouts (``rollout``), and the reconcile step that applies them to an endpoint
(``reconcile``). No I/O and no clock: facts and ``now`` are passed in."""
