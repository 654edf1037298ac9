"""Replay evaluations: conversation data sets through the pipeline that serves requests."""
