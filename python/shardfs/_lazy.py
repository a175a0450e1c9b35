"""Names of a package imported from its submodules on first use, so that
importing the package stays cheap and needs no optional dependency."""

from importlib import import_module


def lazy(namespace, table):
    """The __getattr__ and __dir__ of the package whose globals are
    namespace: a name of table (name -> submodule) is imported from its
    submodule when first asked for, then kept in namespace."""
    package = namespace["__name__"]

    def __getattr__(name):
        module = table.get(name)
        if module is None:
            raise AttributeError("module %r has no attribute %r" % (package, name))
        value = getattr(import_module("." + module, package), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
