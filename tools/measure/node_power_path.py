"""Follow node power through the agent's code, statically, from the RAPL reading to the
Prometheus exporter's output, and count the modules it passes through (issue 34: "node power
passes through each module once, ≤ 3 returns to a module already visited").

Nothing is run: the modules of `agent/` and `common/` are parsed (ast) and node power is
followed as a value through the calls, in the order in which the code is written:

* it starts at the call of the RAPL reader (`agent.device.rapl.read_rapl`): its result is node
  power in the making, and so is whatever is computed from it;
* a call that is handed node power (or an object with node power in one of its fields) and that
  resolves to a function of the house (a module function, a class's method through `self`, a
  parameter's or an attribute's annotated class) is entered; it counts only if it reads node
  power there (a function that merely receives the Snapshot and reads other fields of it is no
  stop); a call that cannot be resolved (a builtin, a library) gives back node power if it was
  handed some;
* a dataclass built with node power in a field carries it in that field only (so `snap.node`
  is not node power, `snap.node_watts` is); `dataclasses.replace` keeps the fields it keeps;
  an attribute set to node power (`self._latest = snapshot`) carries it to the class's readers;
* two roots, in the order the agent runs them: the sampling loop
  (`AgentService._sample_loop`: read, compute, publish into the accounts) and a scrape
  (`SnapshotCollector.collect`: the accounts read, the families written); the route is counted
  from the RAPL reader on (the loop's calls that lead to it are not node power yet).

Every function entered is an event in its module — a function already walked is not walked
again, but handed node power again it is an event again; consecutive events in one module are
one stay. `modules` is the number of distinct modules, `stays` the number of stays, `returns`
the stays in a module entered before.

    python tools/measure/node_power_path.py          # the counts
    python tools/measure/node_power_path.py --route  # and the stays, one a line
    python tools/measure/node_power_path.py --root DIR  # another checkout (an older commit's)

Tooling, not product code; tests/tools/test_node_power_path.py pins the count.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("agent", "common")
SOURCE = ("agent.device.rapl", "read_rapl")
ROOTS = (
    ("agent.cmd.server", "AgentService._sample_loop"),
    ("agent.exporter.prometheus", "SnapshotCollector.collect"),
)
MAX_DEPTH = 40

# A value's taint: FULL (it is, or holds, node power), or the dotted fields of it that do.
FULL = "*"
Taint = frozenset[str]
NONE: Taint = frozenset()
ALL: Taint = frozenset({FULL})


def _field(taint: Taint, name: str) -> Taint:
    """The taint of `value.name` for a value of `taint`."""
    if FULL in taint or name in taint:
        return ALL
    prefix = name + "."
    return frozenset(t[len(prefix):] for t in taint if t.startswith(prefix))


def _join(*taints: Taint) -> Taint:
    out: set[str] = set()
    for taint in taints:
        out |= taint
    return ALL if FULL in out else frozenset(out)


def _nest(name: str, taint: Taint) -> Taint:
    """`taint` as the taint of field `name` of a containing value."""
    return frozenset({name}) if FULL in taint else frozenset(f"{name}.{t}" for t in taint)


# -- the house: modules, their definitions and imports -----------------------------------------


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    defs: dict[str, ast.FunctionDef | ast.ClassDef] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)  # local name → dotted target


@dataclass(frozen=True)
class Function:
    module: str
    qualname: str
    node: ast.FunctionDef
    owner: str | None  # the class's qualified name ("module:Class"), for methods


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
            isinstance(target, ast.Attribute) and target.attr == "dataclass"
        ):
            return True
    return False


class House:
    def __init__(self, root: Path, packages: Sequence[str] = PACKAGES) -> None:
        self.root = root
        self.modules: dict[str, Module] = {}
        for package in packages:
            for path in sorted((root / package).rglob("*.py")):
                parts = path.relative_to(root).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                module = Module(name, path, ast.parse(path.read_text(), str(path)))
                for node in module.tree.body:
                    if isinstance(node, ast.FunctionDef | ast.ClassDef):
                        module.defs[node.name] = node
                    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                        for alias in node.names:
                            module.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    elif isinstance(node, ast.Import):
                        for alias in node.names:
                            module.imports[alias.asname or alias.name.split(".")[0]] = (
                                alias.name if alias.asname else alias.name.split(".")[0])
                self.modules[name] = module
        self._attr_types: dict[str, dict[str, str]] = {}

    def lookup(self, dotted: str, depth: int = 0) -> tuple[str, ast.FunctionDef | ast.ClassDef] | str | None:
        """A definition ("module", node), a module's name, or None (outside the house)."""
        if dotted in self.modules:
            return dotted
        module_name, _, name = dotted.rpartition(".")
        module = self.modules.get(module_name)
        if module is None or depth > 10:
            return None
        if name in module.defs:
            return module_name, module.defs[name]
        if name in module.imports:  # a name handed on
            return self.lookup(module.imports[name], depth + 1)
        return None

    def resolve_name(self, module: str, name: str) -> tuple[str, ast.FunctionDef | ast.ClassDef] | str | None:
        here = self.modules[module]
        if name in here.defs:
            return module, here.defs[name]
        if name in here.imports:
            return self.lookup(here.imports[name])
        return None

    def resolve_annotation(self, module: str, annotation: ast.expr | None) -> str | None:
        """The first class of the house an annotation names ("module:Class")."""
        if annotation is None:
            return None
        names: list[str] = []
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return None
        for node in ast.walk(annotation):
            if isinstance(node, ast.Name):
                names.append(node.id)
        for name in names:
            found = self.resolve_name(module, name)
            if isinstance(found, tuple) and isinstance(found[1], ast.ClassDef):
                return f"{found[0]}:{found[1].name}"
        return None

    def cls(self, key: str) -> tuple[str, ast.ClassDef]:
        module, name = key.split(":")
        node = self.modules[module].defs[name]
        assert isinstance(node, ast.ClassDef)
        return module, node

    def method(self, key: str, name: str, depth: int = 0) -> Function | None:
        """`name` of the class `key` or of a base class of the house."""
        module, node = self.cls(key)
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == name:
                return Function(module, f"{node.name}.{name}", item, key)
        for base in node.bases:
            base_key = self.resolve_annotation(module, base)
            if base_key is not None and depth < 10:
                found = self.method(base_key, name, depth + 1)
                if found is not None:
                    return found
        return None

    def fields(self, key: str) -> list[str]:
        """A dataclass's fields in order (its bases' first)."""
        module, node = self.cls(key)
        out: list[str] = []
        for base in node.bases:
            base_key = self.resolve_annotation(module, base)
            if base_key is not None:
                out += self.fields(base_key)
        out += [s.target.id for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                and "ClassVar" not in ast.unparse(s.annotation)]
        return out

    def attr_types(self, key: str) -> dict[str, str]:
        """What the class's `self.X` hold, where its code says: an annotation, a parameter's
        annotation, a class built; a property's annotated return."""
        if key in self._attr_types:
            return self._attr_types[key]
        module, node = self.cls(key)
        out: dict[str, str] = {}
        self._attr_types[key] = out
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                found = self.resolve_annotation(module, item.annotation)
                if found:
                    out[item.target.id] = found
            if not isinstance(item, ast.FunctionDef):
                continue
            if any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list):
                found = self.resolve_annotation(module, item.returns)
                if found:
                    out[item.name] = found
                continue
            params = {a.arg: a.annotation for a in item.args.args + item.args.kwonlyargs}
            for statement in ast.walk(item):
                target: ast.expr | None = None
                value: ast.expr | None = None
                annotation: ast.expr | None = None
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                    target, value = statement.targets[0], statement.value
                elif isinstance(statement, ast.AnnAssign):
                    target, value, annotation = statement.target, statement.value, statement.annotation
                if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id == "self") or target.attr in out:
                    continue
                found = self.resolve_annotation(module, annotation)
                for candidate in _alternatives(value):
                    if found:
                        break
                    if isinstance(candidate, ast.Name) and candidate.id in params:
                        found = self.resolve_annotation(module, params[candidate.id])
                    elif isinstance(candidate, ast.Call) and isinstance(candidate.func, ast.Name):
                        made = self.resolve_name(module, candidate.func.id)
                        if isinstance(made, tuple) and isinstance(made[1], ast.ClassDef):
                            found = f"{made[0]}:{made[1].name}"
                    elif (isinstance(candidate, ast.Attribute) and isinstance(candidate.value, ast.Name)
                          and candidate.value.id in params):
                        holder = self.resolve_annotation(module, params[candidate.value.id])
                        if holder:
                            found = self.attr_types(holder).get(candidate.attr)
                if found:
                    out[target.attr] = found
        return out


def _alternatives(value: ast.expr | None) -> Iterator[ast.expr]:
    """`a or b` and `x if c else y` give either side."""
    if value is None:
        return
    if isinstance(value, ast.BoolOp):
        for v in value.values:
            yield from _alternatives(v)
    elif isinstance(value, ast.IfExp):
        yield from _alternatives(value.body)
        yield from _alternatives(value.orelse)
    else:
        yield value


# -- the walk ---------------------------------------------------------------------------------


@dataclass
class Frame:
    function: Function
    taint: dict[str, Taint]
    types: dict[str, str]
    returned: Taint = NONE
    used: bool = False


@dataclass
class Walk:
    house: House
    events: list[tuple[str, str]] = field(default_factory=list)
    heap: dict[tuple[str, str], Taint] = field(default_factory=dict)  # (class, attribute) → taint
    _memo: dict[tuple[str, tuple[tuple[str, Taint], ...]], Taint] = field(default_factory=dict)
    _reaches: dict[str, bool] = field(default_factory=dict)
    _used: set[tuple[str, tuple[tuple[str, Taint], ...]]] = field(default_factory=set)
    _depth: int = 0

    # entering a function

    def enter(self, function: Function, taint: dict[str, Taint], types: dict[str, str]) -> tuple[Taint, bool]:
        """Walk `function` with its parameters' taint; its result's taint and whether it read
        node power (its events, and its callees', are kept only then)."""
        key = (f"{function.module}:{function.qualname}", tuple(sorted(taint.items())))
        source = (function.module, function.qualname) == SOURCE
        if key in self._memo or self._depth > MAX_DEPTH:  # passed before: its route is drawn,
            result = self._memo.get(key, NONE)  # but handed node power again it is a stop again
            if taint and key in self._used:
                self.events.append((function.module, function.qualname))
            return result, key in self._used
        self._memo[key] = NONE  # a recursion reads as nothing new
        mark = len(self.events)
        self.events.append((function.module, function.qualname))
        frame = Frame(function, dict(taint), dict(types), used=source)
        self._depth += 1
        try:
            self.block(frame, function.node.body)
        finally:
            self._depth -= 1
        result = ALL if source else frame.returned
        if frame.used:
            self._used.add(key)
        else:  # handed on without being read: no stop (what it hands back stands)
            del self.events[mark:]
        self._memo[key] = result
        return result, frame.used

    def reaches_source(self, function: Function, seen: frozenset[str] = frozenset()) -> bool:
        """Whether `function` calls the RAPL reader, directly or through the house."""
        name = f"{function.module}:{function.qualname}"
        if (function.module, function.qualname) == SOURCE:
            return True
        if name in self._reaches:
            return self._reaches[name]
        if name in seen:
            return False
        types = self.param_types(function)
        found = False
        for node in ast.walk(function.node):
            if isinstance(node, ast.Call):
                callee = self.resolve_call(function, types, node.func)
                if callee is not None and self.reaches_source(callee[0], seen | {name}):
                    found = True
                    break
        self._reaches[name] = found
        return found

    def param_types(self, function: Function) -> dict[str, str]:
        types: dict[str, str] = {}
        arguments = function.node.args
        for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs:
            found = self.house.resolve_annotation(function.module, a.annotation)
            if found:
                types[a.arg] = found
        if function.owner is not None and arguments.args:
            types[arguments.args[0].arg] = function.owner
        return types

    # what a call reaches

    def expr_type(self, function: Function, types: dict[str, str], node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return types.get(node.id)
        if isinstance(node, ast.Attribute):
            holder = self.expr_type(function, types, node.value)
            return self.house.attr_types(holder).get(node.attr) if holder else None
        if isinstance(node, ast.Call):
            callee = self.resolve_call(function, types, node.func)
            if callee is not None:
                return self.house.resolve_annotation(callee[0].module, callee[0].node.returns)
            made = self.resolve_class(function, node.func)
            return made
        return None

    def resolve_class(self, function: Function, func: ast.expr) -> str | None:
        if isinstance(func, ast.Name):
            found = self.house.resolve_name(function.module, func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module = self.house.resolve_name(function.module, func.value.id)
            found = self.house.lookup(f"{module}.{func.attr}") if isinstance(module, str) else None
        else:
            return None
        if isinstance(found, tuple) and isinstance(found[1], ast.ClassDef):
            return f"{found[0]}:{found[1].name}"
        return None

    def resolve_call(self, function: Function, types: dict[str, str], func: ast.expr) -> tuple[Function, bool] | None:
        """The function a call runs, and whether it is bound (a method through its object)."""
        if isinstance(func, ast.Name):
            found = self.house.resolve_name(function.module, func.id)
            if isinstance(found, tuple) and isinstance(found[1], ast.FunctionDef):
                return Function(found[0], found[1].name, found[1], None), False
            return None
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name):
                module = self.house.resolve_name(function.module, func.value.id)
                if isinstance(module, str):  # module.function
                    found = self.house.lookup(f"{module}.{func.attr}")
                    if isinstance(found, tuple) and isinstance(found[1], ast.FunctionDef):
                        return Function(found[0], found[1].name, found[1], None), False
                    return None
            holder = self.expr_type(function, types, func.value)
            if holder is not None:
                method = self.house.method(holder, func.attr)
                if method is not None:
                    return method, True
        return None

    def call(self, frame: Frame, node: ast.Call) -> Taint:
        function = frame.function
        args = [self.expr(frame, a.value if isinstance(a, ast.Starred) else a) for a in node.args]
        keywords = {k.arg: self.expr(frame, k.value) for k in node.keywords}
        func = node.func
        # dataclasses.replace(obj, field=...)
        if isinstance(func, ast.Name) and func.id == "replace" and args:
            return _join(args[0], *(_nest(k, t) for k, t in keywords.items() if k and t))
        made = self.resolve_class(function, func)
        if made is not None:
            return self.construct(frame, made, node, args, keywords)
        receiver = self.expr(frame, func.value) if isinstance(func, ast.Attribute) else NONE
        resolved = self.resolve_call(function, frame.types, func)
        if resolved is None:  # a builtin or a library's: what it was handed comes back
            handed = _join(*args, *keywords.values())
            if handed and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                # `parts.append(x)`, `totals.update(x)`: the container now holds it
                frame.taint[func.value.id] = _join(frame.taint.get(func.value.id, NONE), handed)
            return _join(receiver, handed)
        callee, bound = resolved
        if any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in callee.node.decorator_list):
            bound = False  # called through its object, given none
        handed = _join(receiver if bound else NONE, *args, *(t for t in keywords.values()))
        if not handed and not self.heap and not self.reaches_source(callee):
            return NONE  # nothing of node power can reach it (no attribute holds any yet)
        taint, types = self.bind(callee, bound, receiver, args, keywords)
        result, used = self.enter(callee, taint, types)
        frame.used |= used
        return result

    def bind(self, callee: Function, bound: bool, receiver: Taint, args: list[Taint],
             keywords: dict[str | None, Taint]) -> tuple[dict[str, Taint], dict[str, str]]:
        arguments = callee.node.args
        names = [a.arg for a in arguments.posonlyargs + arguments.args]
        taint: dict[str, Taint] = {}
        if bound and names:
            taint[names[0]] = receiver
            names = names[1:]
        for name, value in zip(names, args, strict=False):
            taint[name] = value
        for keyword, value in keywords.items():
            if keyword is not None:
                taint[keyword] = value
        return {k: v for k, v in taint.items() if v}, self.param_types(callee)

    def construct(self, frame: Frame, key: str, node: ast.Call, args: list[Taint],
                  keywords: dict[str | None, Taint]) -> Taint:
        module, cls = self.house.cls(key)
        if _is_dataclass(cls):
            names = self.house.fields(key)
            taint = [_nest(name, t) for name, t in zip(names, args, strict=False) if t]
            taint += [_nest(k, t) for k, t in keywords.items() if k and t]
            if taint:
                frame.used = True
            return _join(*taint)
        init = self.house.method(key, "__init__")
        if init is None or not (any(args) or any(keywords.values())):
            return NONE
        bound_taint, types = self.bind(init, True, NONE, args, keywords)
        _, used = self.enter(init, bound_taint, types)
        frame.used |= used
        return _join(*(_nest(attr, t) for (owner, attr), t in self.heap.items() if owner == key))

    # statements and expressions

    def block(self, frame: Frame, body: Sequence[ast.stmt]) -> None:
        for statement in body:
            self.statement(frame, statement)

    def statement(self, frame: Frame, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return  # a nested definition runs when called (not followed)
        if isinstance(node, ast.Return):
            if node.value is not None:
                frame.returned = _join(frame.returned, self.expr(frame, node.value))
            return
        if isinstance(node, ast.Assign):
            value = self.expr(frame, node.value)
            for target in node.targets:
                self.assign(frame, target, value, node.value)
            return
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(frame, node.target, self.expr(frame, node.value), node.value)
            return
        if isinstance(node, ast.AugAssign):
            value = _join(self.expr(frame, node.value), self.expr(frame, node.target))
            self.assign(frame, node.target, value, None)
            return
        if isinstance(node, ast.For | ast.AsyncFor):
            self.assign(frame, node.target, self.expr(frame, node.iter), None)  # an element as its container
            self.branches(frame, [node.body, node.orelse, []])
            return
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                self.expr(frame, item.context_expr)
            self.block(frame, node.body)
            return
        if isinstance(node, ast.If | ast.While):
            self.expr(frame, node.test)
            self.branches(frame, [node.body, node.orelse])
            return
        if isinstance(node, ast.Try):
            self.branches(frame, [node.body + node.orelse, *(h.body for h in node.handlers)])
            self.block(frame, node.finalbody)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(frame, child)

    def branches(self, frame: Frame, bodies: Sequence[Sequence[ast.stmt]]) -> None:
        """Each body from the same start, in the order written; after them, a name holds what
        any of them left in it."""
        start, merged = dict(frame.taint), dict[str, Taint]()
        for body in bodies:
            frame.taint = dict(start)
            self.block(frame, body)
            for name, taint in frame.taint.items():
                merged[name] = _join(merged.get(name, NONE), taint)
        frame.taint = merged

    def assign(self, frame: Frame, target: ast.expr, value: Taint, source: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            frame.taint[target.id] = value
            found = self.expr_type(frame.function, frame.types, source) if source is not None else None
            if found:
                frame.types[target.id] = found
            else:
                frame.types.pop(target.id, None)
        elif isinstance(target, ast.Tuple | ast.List):
            for index, element in enumerate(target.elts):
                self.assign(frame, element, _field(value, str(index)), None)
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and value:
            name = target.value.id  # `parts[key] = x`: the container now holds it
            frame.taint[name] = _join(frame.taint.get(name, NONE), value)
        elif isinstance(target, ast.Attribute) and value:
            holder = self.expr_type(frame.function, frame.types, target.value)
            if holder is not None:
                self.heap[(holder, target.attr)] = _join(self.heap.get((holder, target.attr), NONE), value)

    def expr(self, frame: Frame, node: ast.expr) -> Taint:
        if isinstance(node, ast.Name):
            taint = frame.taint.get(node.id, NONE)
            if FULL in taint:
                frame.used = True
            return taint
        if isinstance(node, ast.Attribute):
            holder_taint = self.expr(frame, node.value)
            taint = _field(holder_taint, node.attr)
            holder = self.expr_type(frame.function, frame.types, node.value)
            if holder is not None:
                taint = _join(taint, self.heap.get((holder, node.attr), NONE))
            if FULL in taint:
                frame.used = True
            return taint
        if isinstance(node, ast.Call):
            return self.call(frame, node)
        if isinstance(node, ast.Lambda):
            return NONE
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            saved = dict(frame.taint)
            for generator in node.generators:
                self.assign(frame, generator.target, self.expr(frame, generator.iter), None)
                for condition in generator.ifs:
                    self.expr(frame, condition)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            taint = _join(*(self.expr(frame, p) for p in parts))
            frame.taint = saved
            return taint
        if isinstance(node, ast.Tuple | ast.List):  # element i carries its taint as field "i"
            return _join(*(_nest(str(i), self.expr(frame, e)) for i, e in enumerate(node.elts)))
        children = [self.expr(frame, c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        if isinstance(node, ast.IfExp | ast.BoolOp):  # either side
            return _join(*children[1:]) if isinstance(node, ast.IfExp) else _join(*children)
        return ALL if any(FULL in c for c in children) else NONE


@dataclass(frozen=True)
class Route:
    stays: tuple[tuple[str, tuple[str, ...]], ...]  # (module, the functions entered there)

    @property
    def modules(self) -> int:
        return len({module for module, _ in self.stays})

    @property
    def returns(self) -> int:
        seen: set[str] = set()
        count = 0
        for module, _ in self.stays:
            count += module in seen
            seen.add(module)
        return count

    def revisited(self) -> dict[str, int]:
        """Each module entered more than once, with its number of stays."""
        counts: dict[str, int] = {}
        for module, _ in self.stays:
            counts[module] = counts.get(module, 0) + 1
        return {m: c for m, c in counts.items() if c > 1}


def follow(root: Path = REPO, packages: Sequence[str] = PACKAGES,
           roots: Sequence[tuple[str, str]] = ROOTS) -> Route:
    """Node power's route through the house at `root` (module docstring)."""
    house = House(root, packages)
    walk = Walk(house)
    for module, qualname in roots:
        owner_name, _, name = qualname.rpartition(".")
        if owner_name:
            function = house.method(f"{module}:{owner_name}", name)
        else:
            node = house.modules[module].defs[name]
            function = Function(module, name, node, None) if isinstance(node, ast.FunctionDef) else None
        if function is None:
            raise ValueError(f"no {module}:{qualname}")
        walk.enter(function, {}, walk.param_types(function))
    start = walk.events.index(SOURCE) if SOURCE in walk.events else 0  # from the RAPL reading on
    stays: list[tuple[str, list[str]]] = []
    for module, qualname in walk.events[start:]:
        if stays and stays[-1][0] == module:
            if qualname not in stays[-1][1]:
                stays[-1][1].append(qualname)
        else:
            stays.append((module, [qualname]))
    return Route(tuple((m, tuple(f)) for m, f in stays))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--route", action="store_true", help="print every stay, one a line")
    parser.add_argument("--root", type=Path, default=REPO, help="the checkout to measure (default: this one)")
    args = parser.parse_args(argv)
    route = follow(args.root)
    if args.route:
        seen: set[str] = set()
        for number, (module, functions) in enumerate(route.stays, 1):
            again = "  (again)" if module in seen else ""
            seen.add(module)
            print(f"{number:3d}. {module}: {', '.join(functions)}{again}")
    print(f"modules {route.modules}, stays {len(route.stays)}, returns {route.returns}"
          + (f" ({', '.join(f'{m} ×{c}' for m, c in route.revisited().items())})" if route.returns else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
