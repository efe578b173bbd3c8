"""streamdedup: streaming near-duplicate detection for job announcements."""

__version__ = "0.1.0"
