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


class Terms:
    """How a reader's messages name a source's settings and tensors: as its own file does. A
    Hugging Face directory's are config.json's keys and its tensor names; a reader that maps
    another format onto Hugging Face's names (GGUF) passes its own: keys, Hugging Face key ->
    what the user's file calls it; tensor, a Hugging Face tensor name -> the file's; where, what
    follows a key's value to say where it is (" in config.json")."""

    def __init__(self, keys=None, tensor=None, where=" in config.json"):
        self.keys, self.tensor_name, self.where = keys or {}, tensor, where

    def key(self, k):
        return self.keys.get(k, k)

    def tensor(self, name):
        return self.tensor_name(name) if self.tensor_name else name


HF_TERMS = Terms()
