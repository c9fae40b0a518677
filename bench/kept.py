"""The hand-written block of a generated doc: what lies between the KEPT markers (where goals
stand, runs and changes since the generated tables, written by hand) is carried over when a
bench script rewrites the doc, so a new run never loses it."""

KEPT = ("<!-- kept: written by hand; the bench script that writes this doc carries it over -->",
        "<!-- /kept -->")


def kept(path):
    """The block of the doc at `path` as lines, markers included, and an empty line after it
    (no lines when the doc or its block is missing)."""
    try:
        text = open(path).read()
    except FileNotFoundError:
        return []
    start, end = text.find(KEPT[0]), text.find(KEPT[1])
    if start < 0 or end < start:
        return []
    return text[start:end + len(KEPT[1])].split("\n") + [""]
