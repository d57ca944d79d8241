"""The exception classes a package defines, to check that each derives from its root."""

from __future__ import annotations

import importlib
import pkgutil


def exception_classes(package: str, exclude: tuple[str, ...] = ()) -> list[type[BaseException]]:
    """Every exception class defined in ``package`` and its subpackages (but those under
    ``exclude``), each module imported (``__main__`` modules are not)."""
    names = [package]
    pkg = importlib.import_module(package)
    for info in pkgutil.walk_packages(pkg.__path__, package + "."):
        if info.name.endswith(".__main__"):
            continue
        if any(info.name == e or info.name.startswith(e + ".") for e in exclude):
            continue
        names.append(info.name)
    found = []
    for name in names:
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == name:
                found.append(obj)
    return found


def strays(root: type[BaseException], package: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """The exception classes of ``package`` that do not derive from ``root``."""
    return [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in exception_classes(package, exclude)
        if not issubclass(cls, root)
    ]
