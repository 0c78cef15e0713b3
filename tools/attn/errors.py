"""Bad, the one error every reader raises for a problem with an input file, and the
helpers its messages share. No project imports: every other module may raise it."""


class Bad(Exception):
    """A problem with one input file; main prints it as `convert.py: FILE: PROBLEM`."""

    def __init__(self, path, msg):
        super().__init__(msg)
        self.path, self.msg = path, msg


def listing(names, most=4):
    """The first few names for a one-line message, and how many more there are."""
    names = list(names)
    return ", ".join(map(str, names[:most])) + (" and %d more" % (len(names) - most) if len(names) > most else "")
