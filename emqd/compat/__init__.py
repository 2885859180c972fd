"""What emqd does exactly as Redis does: numbers, long double, glob patterns, SCAN cursors."""
