"""The one exception type for problems a user can cause and fix."""


class UserError(Exception):
    """Bad input, config or file. The entry points print it as one line and exit 1.

    The message names the value, what is wrong with it and how to fix it.
    """
