"""The tests' wall time against CI's budget, from the suite's JUnit reports: one line when within it; past it,
a warning, the files that took longest and the slowest tests. Never fails CI: a machine's noise is not a bug.

    .venv/bin/python .ci/budget.py REPORT.xml... --seconds WALL --budget-min 45
"""

from __future__ import annotations

import argparse
import collections
import xml.etree.ElementTree as ET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="pytest's --junitxml reports (the parallel part, the browser part)")
    parser.add_argument("--seconds", type=int, required=True, help="the tests' wall time")
    parser.add_argument("--budget-min", type=float, required=True)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    cases = [
        (float(case.get("time", 0)), f"{case.get('classname', '')}::{case.get('name', '')}")
        for report in args.reports
        for case in ET.parse(report).getroot().iter("testcase")
    ]
    by_file: collections.Counter[str] = collections.Counter()
    for seconds, name in cases:
        by_file[name.split("::")[0]] += seconds
    budget_s = args.budget_min * 60
    summary = (
        f"ci: tests took {args.seconds / 60:.1f} min of wall time ({len(cases)} tests, "
        f"{sum(s for s, _ in cases) / 60:.1f} min in the tests themselves); budget {args.budget_min:g} min"
    )
    if args.seconds <= budget_s:
        print(f"{summary}: within it")
        return
    print(f"{summary}: WARNING, {(args.seconds - budget_s) / 60:.1f} min past it. Where it went:")
    for name, seconds in by_file.most_common(args.top):
        print(f"  {seconds:8.1f} s  {name}")
    print(f"the {args.top} slowest tests:")
    for seconds, name in sorted(cases, reverse=True)[: args.top]:
        print(f"  {seconds:8.1f} s  {name}")


if __name__ == "__main__":
    main()
