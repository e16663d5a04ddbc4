"""What the similarity report found (grader/course/similarity.py compares; grader/report/similarity.py
renders): the options of a comparison, each lab's flagged pairs, and the class's summary."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_THRESHOLD = 0.5


@dataclass(frozen=True)
class Options:
    threshold: float = DEFAULT_THRESHOLD  # a pair at or above this similarity (0..1) is flagged
    noise: int = 25  # k: matches shorter than this many filtered characters are noise (copydetect's default)
    window: int = 1  # winnowing window: 1 keeps every k-gram (guarantee threshold = noise)
    # a flagged pair shares at least this many characters of tokenized code (about 6 lines): two students
    # who each wrote only the same two-line idiom share 100 % of very little, which is no sign of copying
    min_overlap: int = 250
    top: int = 25  # pairs shown side by side per lab


@dataclass
class Pair:
    lab: str
    file: str
    a: str  # student ids, a < b
    b: str
    share_a: float  # the share of a's code (boilerplate removed) that b also has
    share_b: float
    overlap: int  # matching filtered characters
    slices_a: list[tuple[int, int]] = field(default_factory=list)  # matching ranges of a's text
    slices_b: list[tuple[int, int]] = field(default_factory=list)

    @property
    def similarity(self) -> float:
        return max(self.share_a, self.share_b)


@dataclass
class LabReport:
    lab: str  # "03-vector-add"
    number: int
    title: str
    compared: int = 0  # students with a file of their own
    pairs: list[Pair] = field(default_factory=list)  # flagged, most similar first
    highest: float = 0.0  # the highest similarity of any pair, flagged or not
    skipped: list[str] = field(default_factory=list)  # "ada: vector_add.cu missing (skeleton graded)"


@dataclass
class SimilarityReport:
    options: Options
    labs: list[LabReport] = field(default_factory=list)
    sources: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (lab, student, file) -> text
    generated: str = ""
    unavailable: str = ""  # why nothing was compared (no copydetect)
    notes: list[str] = field(default_factory=list)  # students that could not be read

    @property
    def flagged(self) -> int:
        return sum(len(lab.pairs) for lab in self.labs)

    def summary(self) -> dict[str, Any]:
        """similarity.json: what the class summary shows and links."""
        return {
            "generated": self.generated,
            "threshold": self.options.threshold,
            "unavailable": self.unavailable,
            "flagged": self.flagged,
            "labs": [
                {"lab": lab.lab, "number": lab.number, "title": lab.title, "compared": lab.compared,
                 "flagged": len(lab.pairs), "highest": round(lab.highest, 4),
                 "top": [{"a": p.a, "b": p.b, "file": p.file, "similarity": round(p.similarity, 4)}
                         for p in lab.pairs[:5]]}
                for lab in self.labs
            ],
            "notes": self.notes,
            "options": asdict(self.options),
        }
