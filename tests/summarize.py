"""Sum up the junit files of all phases and ranks into one closing line.

A multi-rank test counts once per launch; it failed if it failed on any rank (the conftest
already copies a rank's failure to the others, this is the belt to those braces).
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(reports: str, failed_phases: list[str]) -> int:
    outcomes: dict[tuple[str, str], str] = {}
    for f in sorted(Path(reports).glob("*.xml")):
        launch = re.sub(r"-rank\d+$", "", f.stem)
        rank = re.search(r"rank(\d+)$", f.stem)
        for case in ET.parse(f).getroot().iter("testcase"):
            key = (launch, f"{case.get('classname')}.{case.get('name')}")
            if case.find("failure") is not None or case.find("error") is not None:
                state = "failed"
                where = f" (rank {rank.group(1)})" if rank else ""
                print(f"FAILED [{launch}]{where} {key[1]}")
            elif case.find("skipped") is not None:
                state = "skipped"
            else:
                state = "passed"
            # Over the ranks of one launch: any failure wins, then any pass.
            rank_order = {"skipped": 0, "passed": 1, "failed": 2}
            prev = outcomes.get(key, "skipped")
            outcomes[key] = max(prev, state, key=rank_order.__getitem__)
    counts = {s: sum(1 for v in outcomes.values() if v == s) for s in ("passed", "failed",
                                                                       "skipped")}
    for phase in failed_phases:
        print(f"FAILED phase: {phase}")
    print(f"tests: {counts['passed']} passed, {counts['failed'] + len(failed_phases)} failed, "
          f"{counts['skipped']} skipped")
    ok = counts["failed"] == 0 and not failed_phases and counts["passed"] > 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
