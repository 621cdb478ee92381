"""The write model: command models, outcomes, the command bus and runner, and the aggregates."""
