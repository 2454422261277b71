"""Lightning callbacks this project adds to the stock ones."""
