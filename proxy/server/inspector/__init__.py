"""The memory inspector at ``/paperclip/ui``: server-rendered pages over the admin API's data."""
