"""The registry of retrievers by name: built-ins and plugins, and making one from a spec.

A `Registry` holds its entries itself; nothing about it lives in module globals, and
importing a retriever module registers nothing. Built-in retrievers are the public
modules of one package, each factory marked with `builtin(name, description)`: a
registry imports the modules and registers what is marked, so every registry built on
the package has them. Plugins are the entry points of one group, read on first use
(`load_plugins` reads them again, say after a distribution was added to `sys.path`).
A test changes the registry only inside `scoped()` (anything registered inside is
forgotten on leaving) or `temporarily(name, factory)` (one entry for the block).
"""
from __future__ import annotations

import importlib
import pkgutil
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Callable, Iterator, Mapping

from garden.errors import GardenError
from garden.retrievers._options import Option, non_finite, read_options
from garden.retrievers._protocol import RetrieverBase, as_retriever
from garden.retrievers._spec import option_value, spec_text

BUILTIN = "builtin"
MARK = "garden_retriever"  # the attribute a built-in factory carries: (name, description)


def builtin(name: str, description: str):
    """Class or function decorator for a built-in retriever module: marks the factory so
    that a registry loading the package registers it as `name`. Registers nothing itself."""

    def decorate(factory):
        setattr(factory, MARK, (name, description))
        return factory

    return decorate


@dataclass(frozen=True)
class Registered:
    name: str
    factory: Callable[..., Any]
    description: str
    origin: str  # "builtin" or the entry point's distribution
    options: Mapping[str, Option] | None = None  # the factory's OPTIONS; None: declares nothing


def declared_options(factory) -> Mapping[str, Option] | None:
    """The factory's ``OPTIONS`` when it is a declaration of ours, else None (the factory
    checks its own options)."""
    options = getattr(factory, "OPTIONS", None)
    if isinstance(options, Mapping) and all(isinstance(o, Option) for o in options.values()):
        return dict(options)
    return None


def describe(factory) -> str:
    """A factory's one-line description: its ``description``, else its docstring's first line."""
    description = getattr(factory, "description", None)
    if isinstance(description, str) and description:
        return description
    lines = (getattr(factory, "__doc__", None) or "").strip().splitlines()
    return lines[0] if lines else "(plugin retriever)"


def _broken(name: str, exc: Exception):
    def factory(**_):
        raise GardenError(f"retriever {name!r} is registered but failed to load: {exc}")

    return factory


class Registry:
    """Retriever factories by name. `package` is imported module by module for the
    built-ins (a module whose name starts with `_` is a helper, not a retriever); `group`
    is the entry-point group plugins are found in."""

    def __init__(self, package: str, group: str):
        self.package, self.group = package, group
        self._entries: dict[str, Registered] = {}
        self._builtins_loaded = False
        self._plugins_loaded = False

    # --- adding ---------------------------------------------------------------------

    def register(self, name: str, description: str, origin: str = "plugin"):
        """Class or function decorator: `add` the factory to this registry."""

        def decorate(factory):
            self.add(name, factory, description, origin)
            return factory

        return decorate

    def add(self, name: str, factory: Callable[..., Any], description: str | None = None,
            origin: str = "plugin") -> Registered:
        """Register `factory` under `name` (replacing an entry of that name)."""
        entry = Registered(name, factory, description or describe(factory), origin, declared_options(factory))
        self._entries[name] = entry
        return entry

    def load_builtins(self) -> None:
        """Import every public module of the package once and register each factory
        marked `builtin` that the module defines (not one it imports from another)."""
        if self._builtins_loaded:
            return
        self._builtins_loaded = True
        package = importlib.import_module(self.package)
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{self.package}.{info.name}")
            for value in vars(module).values():
                mark = getattr(value, "__dict__", {}).get(MARK)
                if mark is not None and getattr(value, "__module__", None) == module.__name__:
                    name, description = mark
                    self.add(name, value, description, BUILTIN)

    def load_plugins(self) -> None:
        """Read the entry-point group and register every name not registered yet. A plugin
        that fails to load is listed, and making it raises one line saying why: a broken
        plugin must not break the garden."""
        self.load_builtins()  # a plugin never shadows a built-in of the same name
        self._plugins_loaded = True
        for ep in entry_points(group=self.group):
            if ep.name in self._entries:
                continue
            dist = getattr(ep, "dist", None)
            origin = f"plugin {dist.name}" if dist is not None else "plugin"
            try:
                factory = ep.load()
            except Exception as exc:  # whatever the plugin's import raises
                self.add(ep.name, _broken(ep.name, exc), f"(failed to load: {exc})", "plugin")
                continue
            self.add(ep.name, factory, describe(factory), origin)

    def _loaded(self) -> dict[str, Registered]:
        self.load_builtins()
        if not self._plugins_loaded:
            self.load_plugins()
        return self._entries

    # --- reading --------------------------------------------------------------------

    def entries(self) -> dict[str, Registered]:
        """Every registered retriever by name, sorted."""
        return dict(sorted(self._loaded().items()))

    def names(self) -> list[str]:
        return sorted(self._loaded())

    def get(self, name: str) -> Registered:
        known = self._loaded()
        if name not in known:
            raise GardenError(f"unknown retriever {name!r}; known: {', '.join(sorted(known))}")
        return known[name]

    def make(self, spec: str, **options) -> RetrieverBase:
        """A retriever by registered name, with options from the spec and from keywords
        (keywords win). A factory with declared ``OPTIONS`` gets only values its declaration
        accepts (type, range, finiteness: one line per refused option, all at once). One that
        declares nothing gets the spec's values as `parse_spec` reads them; a non-finite
        number is refused for it too, and its TypeError (an option it does not take) becomes
        one line. What the factory returns is made a full retriever by `as_retriever`."""
        name, text = spec_text(spec)
        entry = self.get(name)
        # a factory that makes its members by name (a fusion) makes them from this registry
        scope = {"registry": self} if getattr(entry.factory, "MAKES_MEMBERS", False) else {}
        if entry.options is not None:
            return as_retriever(entry.factory(**read_options(name, entry.options, text, options), **scope), name)
        given: dict[str, Any] = {**{k: option_value(v) for k, v in text.items()}, **options}
        shown = {**text, **options}
        bad = [f"retriever {name}: option {key} must be a finite number (got {shown[key]!r})"
               for key, value in given.items() if non_finite(value)]
        if bad:
            raise GardenError(bad)
        try:
            made = entry.factory(**given)
        except TypeError as exc:
            detail = " ".join(str(exc).split())  # one line, whatever the factory wrote
            raise GardenError(f"retriever {name} does not take those options ({detail})") from None
        return as_retriever(made, name)

    # --- the seam for tests -----------------------------------------------------------

    @contextmanager
    def scoped(self) -> Iterator[Registry]:
        """The registry as it is now, put back on leaving: whatever is registered or
        loaded inside the block is forgotten."""
        saved = dict(self._entries), self._builtins_loaded, self._plugins_loaded
        try:
            yield self
        finally:
            self._entries, self._builtins_loaded, self._plugins_loaded = saved

    @contextmanager
    def temporarily(self, name: str, factory: Callable[..., Any], description: str | None = None,
                    origin: str = "plugin test") -> Iterator[Registered]:
        """`factory` registered as `name` for the block only (over any entry of that name)."""
        with self.scoped():
            self._loaded()  # the plugins first, so none of them can replace the entry
            yield self.add(name, factory, description, origin)
