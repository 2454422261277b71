"""What a run reports: the summary table and the plots."""
