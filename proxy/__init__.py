"""Paperclip: a transparent OpenAI-compatible proxy with bounded context and long-term memory."""

__version__ = "0.1.0"
