"""Launcher: child sessions as processes of their own, with lifelines and completions."""
