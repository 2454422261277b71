"""What every run sets up: the config, the trainer, precision, files, the CSV logger."""
