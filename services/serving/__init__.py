"""The serving controller: the one writer of ``ev.endpoint.*`` (model-serving endpoints, their
replicas, scaling and rollout decisions, tokens)."""
