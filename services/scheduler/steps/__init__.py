"""The scheduler's decision steps: each turns a rule's or the placer's decisions into changes on
the workspace of a decision (a pass, or a run of creates), which commits them."""
