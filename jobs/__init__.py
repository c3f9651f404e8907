"""Producer side: job specs, submission, status (issue 5)."""
