"""`specdecode bench`: methods side by side on the same prompts, alternating, with reports under docs/bench/."""
