"""Train, evaluate and ship a PyTorch Lightning classifier."""
