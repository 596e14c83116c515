"""``elastic-sim compare``: one scenario under several modes, side by side."""
