"""The mutation record: how many of a module's mutants its tests killed
(``tools`` mutation harness; ``bench/results/mutation.json`` holds one per module)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from hvdscale.records.fields import Doc, Record

W = "the mutation harness (tools/mutation)"


class MutationRecord(Record, tag="mutation", kw_only=True):
    """One module's mutation run."""

    kind: ClassVar[str] = "mutation"
    summary: ClassVar[str] = "how many of a module's mutants its tests killed"

    name: Annotated[str, Doc("the module's short name", writer=W)]
    path: Annotated[str, Doc("the module's file", writer=W)]
    tests: Annotated[list[str], Doc("the tests run against each mutant", writer=W)]
    functions: Annotated[list[str], Doc("functions mutated (empty: all)", writer=W)]
    np: Annotated[int, Doc("MPI ranks the tests ran on", writer=W)]
    full: Annotated[bool, Doc("every mutant ran (not a CI slice)", writer=W)]
    ci: Annotated[bool, Doc("the CI slice's run", writer=W)]
    tool: Annotated[str, Doc("the mutation tool and version", writer=W)]
    runner: Annotated[str, Doc("the test command", writer=W)]
    seconds: Annotated[float, Doc("the run's wall time", "s", W)]
    load_before: Annotated[list[float], Doc("the host's load before", writer=W)]
    load_after: Annotated[list[float], Doc("the host's load after", writer=W)]
    mutants: Annotated[int, Doc("mutants made", writer=W)]
    killed: Annotated[int, Doc("mutants a test failed on", writer=W)]
    survived: Annotated[int, Doc("mutants every test passed on", writer=W)]
    timed_out: Annotated[int, Doc("mutants whose tests ran past the limit", writer=W)]
    suspicious: Annotated[int, Doc("mutants whose tests ran suspiciously long", writer=W)]
    untested: Annotated[int, Doc("mutants no test reached", writer=W)]
    survivors: Annotated[list[Any], Doc("the surviving mutants, with their lines", writer=W)]
    ci_tests: Annotated[list[str] | None, Doc("the CI slice's tests", writer=W)] = None
    others_read: Annotated[bool | None, Doc("other modules' results were read", writer=W)
                           ] = None
    tool_error: Annotated[str | None, Doc("the tool's error, if it failed", writer=W)] = None
    tool_restarts: Annotated[list[Any] | None, Doc("the tool's restarts", writer=W)] = None
    test_timeout_s: Annotated[float | None, Doc("the per-mutant test limit", "s", W)] = None
    untested_lines: Annotated[list[Any] | None, Doc("lines no test reached", writer=W)] = None
