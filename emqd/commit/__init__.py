"""The commit path: plans applied, kept by the sinks, then answered; what they did
(events) and when clock work is due."""
