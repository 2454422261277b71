"""How a command talks to a person: entry points, errors, hints, console output."""
