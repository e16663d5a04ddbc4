"""A lab's late record (grader/course/policy.py assessed it), said to the student in one paragraph."""

from __future__ import annotations

import math
from datetime import datetime

from grader.model.results import LateRecord
from grader.model.text import amount
from grader.report._format import fmt_date, fmt_points


def explain(record: LateRecord, max_score: float) -> str:
    """One short, friendly paragraph for the student: how the penalty (or none) came about."""
    if not record.due:
        return "This lab has no due date, so no late penalty applies."
    due = f"due {fmt_date(record.due)}" + (f" (with your {record.extension})" if record.extension else "")
    if not record.submitted:
        return (f"This lab was {due}. No trustworthy submission time was found for your submission, so no late "
                "penalty was applied.")
    when = f"Your submission is dated {fmt_date(record.submitted)} ({record.source})"
    if record.late_seconds <= 0:
        after = datetime.fromisoformat(record.submitted) > datetime.fromisoformat(record.due)
        grace = f", within the {amount(record.grace_minutes, 'minute')} grace period" if after else ""
        return f"This lab was {due}. {when}: on time{grace}. No penalty."
    late = late_text(record.late_seconds)
    parts = [f"This lab was {due}. {when}: {late} late."]
    if record.late_days_used:
        parts.append(f"{amount(record.late_days_used, 'late day')} of your course allowance covered "
                     f"{'it' if not record.charged else 'part of it'} ({record.late_days_left} left).")
    if record.charged:
        capped = " (the cap)" if record.penalty_percent >= record.cap_percent and record.cap_percent < \
            record.charged * record.rate_percent else ""
        parts.append(f"The remaining {amount(record.charged, record.unit)} cost {record.rate_percent:g} % each: "
                     f"{record.penalty_percent:g} %{capped} of your raw score {fmt_points(record.raw_score)}, "
                     f"so {fmt_points(record.penalty)} points come off and the lab counts "
                     f"{fmt_points(record.raw_score - record.penalty)} / {fmt_points(max_score)}.")
    else:
        parts.append("No penalty.")
    return " ".join(parts)


def late_text(seconds: float) -> str:
    hours = seconds / 3600
    if hours < 1:
        return amount(math.ceil(seconds / 60), "minute")
    if hours < 48:
        return amount(round(hours, 1), "hour")
    return amount(round(hours / 24, 1), "day")
