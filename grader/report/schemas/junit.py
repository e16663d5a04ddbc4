"""JUnit XML as Jenkins (junit plugin), GitLab (artifacts:reports:junit) and the GitHub test-report
actions read it: the structure of the common JUnit schema (Ant's junitreport / the jenkins junit XSD).

    <testsuites [name tests failures errors skipped time]>
      <testsuite name tests failures errors skipped time [timestamp hostname id package]>
        <properties><property name value/>*</properties>?
        <testcase name classname time>
          (<failure message type>text</failure> | <error message type>text</error> | <skipped message/>)?
          <system-out/>? <system-err/>?
        </testcase>*
        <system-out/>? <system-err/>?
      </testsuite>*
    </testsuites>

Each suite's counts must equal its children; the root's counts the sum of its suites.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

SUITES_ATTRS = {"name", "tests", "failures", "errors", "skipped", "disabled", "time", "timestamp"}
SUITE_REQUIRED = ("name", "tests", "failures", "errors", "skipped", "time")
SUITE_OPTIONAL = {"timestamp", "hostname", "id", "package", "disabled", "file"}
CASE_REQUIRED = ("name", "classname", "time")
CASE_OPTIONAL = {"assertions", "status", "file", "line"}
OUTCOMES = ("failure", "error", "skipped")
COUNT_OF = {"failure": "failures", "error": "errors", "skipped": "skipped"}
CASE_CHILDREN = set(OUTCOMES) | {"system-out", "system-err", "properties"}
SUITE_CHILD_ORDER = {"properties": 0, "testcase": 1, "system-out": 2, "system-err": 2}
# the XSD's timestamp: an ISO 8601 date and time without a zone
TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?$")


def _count(value: str | None, where: str, errors: list[str]) -> int | None:
    if value is None:
        return None
    if not value.isdigit():
        errors.append(f"{where}: {value!r} is not a non-negative integer")
        return None
    return int(value)


def _time(value: str | None, where: str, errors: list[str]) -> None:
    if value is None:
        return
    try:
        t = float(value)
    except ValueError:
        errors.append(f"{where}: time {value!r} is not a number")
        return
    if not math.isfinite(t) or t < 0:
        errors.append(f"{where}: time {value!r} is not a non-negative number of seconds")


def _case(case: ET.Element, where: str, errors: list[str]) -> str:
    """Checks one testcase; returns its outcome: failure, error, skipped or passed."""
    for key in CASE_REQUIRED:
        if key not in case.attrib:
            errors.append(f"{where}: missing attribute {key!r}")
    for key in set(case.attrib) - set(CASE_REQUIRED) - CASE_OPTIONAL:
        errors.append(f"{where}: unknown attribute {key!r}")
    if not case.get("name"):
        errors.append(f"{where}: empty name")
    _time(case.get("time"), where, errors)
    outcomes = [c for c in case if c.tag in OUTCOMES]
    for child in case:
        if child.tag not in CASE_CHILDREN:
            errors.append(f"{where}: unexpected <{child.tag}>")
    if len(outcomes) > 1:
        errors.append(
            f"{where}: more than one of failure/error/skipped ({', '.join(c.tag for c in outcomes)})"
        )
    for child in outcomes:
        if "message" not in child.attrib:
            errors.append(f"{where}/{child.tag}: missing attribute 'message'")
        if child.tag != "skipped" and "type" not in child.attrib:
            errors.append(f"{where}/{child.tag}: missing attribute 'type'")
        if len(child):
            errors.append(f"{where}/{child.tag}: holds elements; it holds text only")
    tags = [c.tag for c in case]
    if outcomes and "system-out" in tags and tags.index("system-out") < tags.index(outcomes[0].tag):
        errors.append(f"{where}: <system-out> comes before <{outcomes[0].tag}>")
    return outcomes[0].tag if outcomes else "passed"


def _suite(suite: ET.Element, where: str, errors: list[str]) -> dict[str, int]:
    for key in SUITE_REQUIRED:
        if key not in suite.attrib:
            errors.append(f"{where}: missing attribute {key!r}")
    for key in set(suite.attrib) - set(SUITE_REQUIRED) - SUITE_OPTIONAL:
        errors.append(f"{where}: unknown attribute {key!r}")
    _time(suite.get("time"), where, errors)
    stamp = suite.get("timestamp")
    if stamp is not None and not TIMESTAMP.match(stamp):
        errors.append(f"{where}: timestamp {stamp!r} is not YYYY-MM-DDThh:mm:ss")
    order = []
    for child in suite:
        if child.tag not in SUITE_CHILD_ORDER:
            errors.append(f"{where}: unexpected <{child.tag}>")
        else:
            order.append(SUITE_CHILD_ORDER[child.tag])
    if order != sorted(order):
        errors.append(f"{where}: children out of order (properties, testcase*, system-out, system-err)")
    if len(suite.findall("properties")) > 1:
        errors.append(f"{where}: more than one <properties>")
    for props in suite.findall("properties"):
        for prop in props:
            if prop.tag != "property" or "name" not in prop.attrib or "value" not in prop.attrib:
                errors.append(f"{where}/properties: <{prop.tag}> is not a <property name value>")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for i, case in enumerate(suite.findall("testcase")):
        outcome = _case(
            case, f"{where}/testcase[{i}] {case.get('classname', '')}.{case.get('name', '')}", errors
        )
        counts["tests"] += 1
        if outcome in COUNT_OF:
            counts[COUNT_OF[outcome]] += 1
    for key, n in counts.items():
        declared = _count(suite.get(key), f"{where}@{key}", errors)
        if declared is not None and declared != n:
            errors.append(f"{where}: {key}={declared} but its testcases hold {n}")
    return counts


def validate_junit(text: str | bytes) -> list[str]:
    """Problems with a JUnit XML document; [] when CI test-report readers accept it."""
    try:
        root = ET.fromstring(text.encode("utf-8") if isinstance(text, str) else text)
    except ET.ParseError as err:
        return [f"not well-formed XML: {err}"]
    errors: list[str] = []
    if root.tag == "testsuite":
        _suite(root, "testsuite", errors)
        return errors
    if root.tag != "testsuites":
        return [f"root element is <{root.tag}>, not <testsuites> or <testsuite>"]
    for key in set(root.attrib) - SUITES_ATTRS:
        errors.append(f"testsuites: unknown attribute {key!r}")
    _time(root.get("time"), "testsuites", errors)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for child in root:
        if child.tag != "testsuite":
            errors.append(f"testsuites: unexpected <{child.tag}>")
    for i, suite in enumerate(root.findall("testsuite")):
        for key, n in _suite(suite, f"testsuite[{i}] {suite.get('name', '')}", errors).items():
            totals[key] += n
    for key, n in totals.items():
        declared = _count(root.get(key), f"testsuites@{key}", errors)
        if declared is not None and declared != n:
            errors.append(f"testsuites: {key}={declared} but its suites hold {n}")
    return errors


__all__ = ["validate_junit"]
