"""Py4J's name lookups, remembered: one round trip to the JVM per class and static method a process uses, instead of
two more for every call.

On a classic session each PySpark function (`F.col`, `F.when`, ...) resolves its JVM method anew: PySpark asks the
JVM view for the class `org.apache.spark.sql.functions` and then the class for the method, each a Py4J reflection
request, before the call itself; `_to_seq` does the same for `PythonUtils.toSeq`. A warm run on tiny data made
~32,000 Py4J requests, of which ~10,500 were these lookups (docs/performance-log.md). The JVM's answer to "what is
this name" does not change while it runs, so the Python objects it was answered with are kept on the object that
asked: the `JVMView` for the classes (and packages) it resolved, a `JavaPackage` for its classes and sub-packages, a
`JavaClass` for its static methods and nested classes. A static field's value is never kept (it may change), nor is
a failed lookup, nor a package answer for a name that reads as a class (`Foo`: the JVM answers "package" for a
class it cannot see yet, which a later import may change). Py4J memoizes these itself from its next release
(py4j/py4j#596); PySpark 4.2 pins the one before it.

The cache lives on Py4J's objects, so a new gateway (a new JVM) starts with none. Process-wide, installed once by
`quorumlake.pipelines.engine.session` for the local sessions it creates; a session Databricks hands over is left as it
is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_installed = False


def remember_lookups() -> bool:
    """Make Py4J keep the answers of its name lookups (see the module's docstring); True when installed (now or
    before), False when this Py4J does not have the classes it patches (then lookups go on as they are)."""
    global _installed
    if _installed:
        return True
    try:
        from py4j.java_gateway import JavaClass, JavaMember, JavaPackage, JVMView
    except ImportError:
        return False
    if not all(callable(getattr(cls, "__getattr__", None)) for cls in (JVMView, JavaPackage, JavaClass)):
        return False
    _remembering(JVMView, lambda name, value: _class_or_package(name, value, JavaClass, JavaPackage))
    _remembering(JavaPackage, lambda _name, value: isinstance(value, (JavaClass, JavaPackage)))
    _remembering(JavaClass, lambda _name, value: isinstance(value, (JavaMember, JavaClass)))
    _installed = True
    return True


def _class_or_package(name: str, value: Any, java_class: type, java_package: type) -> bool:
    return isinstance(value, java_class) or (isinstance(value, java_package) and not name[:1].isupper())


def _remembering(cls: type, keep: Callable[[str, Any], bool]) -> None:
    """Wrap `cls.__getattr__` (called only for names the object does not have) so that the answers `keep` accepts
    are stored in the object's own dictionary, under a name of their own, and returned from there."""
    lookup = cls.__getattr__

    def __getattr__(self, name: str) -> Any:
        known = self.__dict__.get("_quorumlake_lookups")
        if known is not None and name in known:
            return known[name]
        value = lookup(self, name)
        if keep(name, value):
            if known is None:
                known = self.__dict__.setdefault("_quorumlake_lookups", {})
            known[name] = value
        return value

    __getattr__.__wrapped__ = lookup  # type: ignore[attr-defined]
    cls.__getattr__ = __getattr__
