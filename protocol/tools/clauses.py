#!/usr/bin/env python3
"""Extracts the numbered clauses of protocol/SPEC.md.

A clause is defined by its id in brackets at the very start of a line, e.g. `[4.6-2] ...`.
Its id must match the section it sits in (`## 4 ...` gives `4-K`, `### 4.6 ...` gives
`4.6-K`) and K must count 1, 2, 3, ... within that section. The one-line summaries of
clauses.txt come from tools/summaries.tsv (id TAB summary); a clause without one gets
the start of its sentence. Appendices after the clause index (Appendix B) are informative:
a bracketed clause id there is an error, and their cross-references are checked too.

    python3 protocol/tools/clauses.py           # write protocol/clauses.txt and the
                                                # clause index at the end of SPEC.md
    python3 protocol/tools/clauses.py --check   # verify both are current, and that every
                                                # vector cites existing clauses
"""

import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOCOL = os.path.dirname(HERE)
SPEC = os.path.join(PROTOCOL, "SPEC.md")
CLAUSES = os.path.join(PROTOCOL, "clauses.txt")
VECTORS = os.path.join(PROTOCOL, "vectors")

BEGIN = "<!-- clause-index:begin -->"
END = "<!-- clause-index:end -->"
HEADING = re.compile(r"^(##+) (\d+(?:\.\d+)?) ")
DEFINITION = re.compile(r"^\[(\d+(?:\.\d+)?)-(\d+)\] (.+)$")
BRACKETED = re.compile(r"\[\d+(?:\.\d+)?-\d+\]")
REFERENCE = re.compile(r"(?<![\w.-])([1-9](?:\.\d{1,2})?-\d{1,2})(?![\w-])")
SUMMARIES = os.path.join(HERE, "summaries.tsv")
SUMMARY_MAX = 79


def summarize(text):
    text = text.replace("`", "").strip()
    if len(text) <= SUMMARY_MAX:
        return text
    cut = text[:SUMMARY_MAX - 3]
    cut = cut[:cut.rfind(" ")] if " " in cut else cut
    return cut.rstrip(" ,;:") + "..."


def parse(spec_text):
    """[(id, summary)] in document order, and a list of problems."""
    clauses, problems = [], []
    section, expected = None, {}
    body = spec_text.split(BEGIN)[0]
    for number, line in enumerate(body.splitlines(), 1):
        heading = HEADING.match(line)
        if heading:
            section = heading.group(2)
            continue
        match = DEFINITION.match(line)
        if match:
            prefix, k = match.group(1), int(match.group(2))
            cid = "%s-%d" % (prefix, k)
            if prefix != section:
                problems.append("line %d: clause %s is in section %s" % (number, cid, section))
            want = expected.get(prefix, 0) + 1
            if k != want:
                problems.append("line %d: clause %s, expected %s-%d" % (number, cid, prefix, want))
            expected[prefix] = k
            clauses.append((cid, summarize(match.group(3))))
            rest = match.group(3)
        else:
            rest = line
        if BRACKETED.search(re.sub(r"`[^`]*`", "", rest)):
            problems.append("line %d: bracketed clause id not at the start of a line" % number)
    ids = [cid for cid, _ in clauses]
    for cid in sorted({c for c in ids if ids.count(c) > 1}):
        problems.append("clause %s defined more than once" % cid)
    # Cross-references written without brackets, e.g. "(3.4-6)", must name real clauses.
    for number, line in enumerate(body.splitlines(), 1):
        match = DEFINITION.match(line)
        text = match.group(3) if match else line
        for ref in REFERENCE.findall(text):
            if ref not in ids:
                problems.append("line %d: reference to unknown clause %s" % (number, ref))
    problems += check_after_index(spec_text, ids)
    return clauses, problems


def check_after_index(spec_text, ids):
    """Appendices after the index (Appendix B on) are informative: they define no clause,
    and their cross-references must name real clauses like the rest of the document."""
    if END not in spec_text:
        return []
    head, _, tail = spec_text.partition(END)
    first = head.count("\n") + 1
    problems = []
    for number, line in enumerate(tail.splitlines()[1:], first + 1):
        if BRACKETED.search(re.sub(r"`[^`]*`", "", line)):
            problems.append("line %d: bracketed clause id after the clause index" % number)
        for ref in REFERENCE.findall(line):
            if ref not in ids:
                problems.append("line %d: reference to unknown clause %s" % (number, ref))
    return problems


def load_summaries():
    summaries = {}
    if os.path.exists(SUMMARIES):
        for line in open(SUMMARIES, encoding="utf-8"):
            if line.strip() and not line.startswith("#"):
                cid, _, text = line.rstrip("\n").partition("\t")
                summaries[cid] = text.strip()
    return summaries


def clauses_txt(clauses, summaries):
    return "".join("%s\t%s\n" % (cid, summaries.get(cid, auto)) for cid, auto in clauses)


def index_block(clauses):
    groups, order = {}, []
    for cid, _ in clauses:
        prefix = cid.rsplit("-", 1)[0]
        if prefix not in groups:
            groups[prefix] = []
            order.append(prefix)
        groups[prefix].append(cid)
    lines = [BEGIN, "", "%d clauses." % len(clauses), ""]
    lines += [", ".join(groups[p]) for p in order]
    lines += ["", END]
    return "\n".join(lines)


def with_index(spec_text, clauses):
    head, _, tail = spec_text.partition(BEGIN)
    _, _, tail = tail.partition(END)
    return head + index_block(clauses) + tail


def vector_citations():
    """{vector name: [clause ids]} from every .vec file, and problems found."""
    cited, problems = {}, []
    for path in sorted(glob.glob(os.path.join(VECTORS, "*.vec"))):
        name = None
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if words[0] == "vector":
                name = words[1]
                cited[name] = []
            elif words[0] == "clause":
                cited[name].extend(words[1:])
    return cited, problems


def main(argv):
    check = "--check" in argv
    spec_text = open(SPEC, encoding="utf-8").read()
    if BEGIN not in spec_text or END not in spec_text:
        print("SPEC.md lacks the clause index markers")
        return 1
    clauses, problems = parse(spec_text)
    ids = {cid for cid, _ in clauses}
    cited, vector_problems = vector_citations()
    problems += vector_problems
    for name, refs in cited.items():
        if not refs:
            problems.append("vector %s cites no clause" % name)
        for ref in refs:
            if ref not in ids:
                problems.append("vector %s cites unknown clause %s" % (name, ref))
    summaries = load_summaries()
    for cid in sorted(set(summaries) - ids):
        problems.append("summaries.tsv names unknown clause %s" % cid)
    for cid, text in summaries.items():
        if len(text) > SUMMARY_MAX:
            problems.append("summary of %s is longer than %d characters" % (cid, SUMMARY_MAX))
    missing = [cid for cid, _ in clauses if cid not in summaries]
    if missing:
        print("note: no summary in summaries.tsv for " + ", ".join(missing))
    new_txt = clauses_txt(clauses, summaries)
    new_spec = with_index(spec_text, clauses)
    if check:
        if open(CLAUSES, encoding="utf-8").read() != new_txt if os.path.exists(CLAUSES) else True:
            problems.append("clauses.txt is out of date (run protocol/tools/clauses.py)")
        if new_spec != spec_text:
            problems.append("SPEC.md clause index is out of date (run protocol/tools/clauses.py)")
    else:
        with open(CLAUSES, "w", encoding="utf-8") as f:
            f.write(new_txt)
        if new_spec != spec_text:
            with open(SPEC, "w", encoding="utf-8") as f:
                f.write(new_spec)
    for problem in problems:
        print(problem)
    covered = {ref for refs in cited.values() for ref in refs}
    print("%d clauses, %d vectors, %d clauses cited by vectors" %
          (len(clauses), len(cited), len(covered & ids)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
