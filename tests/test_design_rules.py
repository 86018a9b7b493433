"""Rules of the code's shape that a reviewer would otherwise check by hand."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIND_NAMES = ("lm", "seq2seq", "classification")
_NAMES = "|".join(KIND_NAMES)
COMPARED = re.compile(rf"""(==|!=|\bin)\s*\(?\s*["']({_NAMES})["']|["']({_NAMES})["']\s*(==|!=)""")


def test_no_task_kind_name_is_compared_outside_the_kinds():
    """The task kind answers kind-specific questions (through its methods and the card it
    writes); tracking, training and commands never branch on a kind's name."""
    offenders = []
    for path in sorted((ROOT / "experiments").rglob("*.py")):
        if "kinds" in path.relative_to(ROOT).parts:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if COMPARED.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_rule_sees_a_comparison():
    assert COMPARED.search('if card["kind"] == "lm":')
    assert COMPARED.search("if 'classification' != kind:")
    assert COMPARED.search('if kind in ("seq2seq", "lm"):')
    assert not COMPARED.search('"kind": "lm",')


def _kind_names_outside_task_records(source: str, names: set[str]) -> list[tuple[int, str]]:
    """Every string constant of `source` that is a kind's name, except in the arguments of a
    `Task(...)` call (a task's builder naming the kind of its task: `kinds.get("seq2seq")`)."""
    tree = ast.parse(source)
    declared = set()
    for node in ast.walk(tree):
        # A task's own name (`name: Literal["lm"]`, and `ALIASES`' old name -> name) may be
        # spelled like a kind's: it names the task, not its kind.
        task_name = isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "name"
        aliases = isinstance(node, ast.Assign) and any(
            getattr(t, "id", "") == "ALIASES" for t in node.targets
        )
        if task_name or aliases:
            declared |= {id(inner) for inner in ast.walk(node)}
        if isinstance(node, ast.Call):
            func = node.func
            if getattr(func, "id", getattr(func, "attr", None)) == "Task":
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    declared |= {id(inner) for inner in ast.walk(arg)}
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in names and id(node) not in declared
    ]


def test_no_task_kind_name_is_spelled_outside_the_kinds_but_by_a_task():
    """Wherever a kind's name would be compared, looked up or listed (`{"lm": ...}[kind]`,
    `kinds.get("seq2seq")`, `Literal["lm", ...]`, `match kind: case "lm"`), a new kind would
    need an edit there too: outside `experiments/kinds/`, only a task's `Task(...)`
    record names its kind."""
    from experiments import kinds

    names = set(KIND_NAMES) | set(kinds.names())
    offenders = []
    for path in sorted((ROOT / "experiments").rglob("*.py")):
        if "kinds" in path.relative_to(ROOT).parts:
            continue
        for number, name in _kind_names_outside_task_records(path.read_text("utf-8"), names):
            offenders.append(f"{path.relative_to(ROOT)}:{number}: {name!r}")
    assert not offenders, "\n".join(offenders)


def test_the_spelling_rule_sees_lookups_and_allows_task_records():
    names = set(KIND_NAMES)
    seen = _kind_names_outside_task_records(
        'x = {"lm": 1}[kind]\nkinds.get("seq2seq")\nT = Literal["classification"]\n'
        'match k:\n    case "lm":\n        pass\n',
        names,
    )
    assert sorted(line for line, _ in seen) == [1, 2, 3, 5]
    assert not _kind_names_outside_task_records('Task("reverse", "seq2seq", vocab)', names)
    assert not _kind_names_outside_task_records('Task("x", kinds.get("lm"), vocab)', names)
    assert not _kind_names_outside_task_records('"""a lm docstring"""\nx = "slm"', names)
    # a task's own name, where the task declares it, is not its kind's
    assert not _kind_names_outside_task_records('class T:\n    name: Literal["lm"]', names)
    assert not _kind_names_outside_task_records('ALIASES = {"charlm": "lm"}', names)
    assert _kind_names_outside_task_records('kind: Literal["lm"]\nOTHER = {"a": "lm"}', names)


def test_a_task_is_one_module_of_the_tasks_package_and_config_holds_none():
    """`experiments/tasks/` holds task modules only (helpers live in `experiments/data/`),
    each the home of one task's section (with its builder), named after it; `config.py`
    defines no task section (only the base it annotates `task` with)."""
    from experiments import config, tasks
    from experiments.data.sections import TaskSection

    modules = {p.stem for p in (ROOT / "experiments" / "tasks").glob("*.py")} - {"__init__"}
    homes = {}
    for name in tasks.names():
        module = tasks.section(name).__module__
        if module.startswith("experiments.tasks."):
            homes.setdefault(module.rpartition(".")[2], []).append(name)
    assert homes == {module: [module] for module in modules}
    in_config = [
        value
        for value in vars(config).values()
        if isinstance(value, type) and issubclass(value, TaskSection) and value is not TaskSection
    ]
    assert not in_config, in_config
