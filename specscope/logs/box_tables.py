"""Tables drawn with boxes, made the pipe tables the table readers read (issue 16).

Tools print their tables in boxes: tabulate's 'pretty' and 'grid' formats rule them with
'+-----+' ('+=====+' under a grid's header), rich and evalscope with box-drawing characters
('┌───┬───┐', '│ a │ b │', '╞═══╪═══╡', '┡━━━╇━━━┩'). A paste keeps them, and the readers of
an author's table (parsers/spec_decode_table.toml, stated_speedup_table.toml) know only
'| a | b |' rows and '|---|---|' rules. Each line is rewritten on its own, so that line
numbers stay: a row drawn with box bars gets pipes, and a rule of box corners, joints and
horizontals becomes a markdown rule with the same columns. A line that only looks like a
rule ('-----', '=====', a setext heading, a bench's '==== Serving Benchmark Result ====')
has no corner or joint and is left alone, as is any line with a word in it.
"""

from __future__ import annotations

import regex

# The vertical bars of a box's rows (light, heavy, double).
_BARS = "│┃║"
# Corners and joints of box rules, and the horizontals between them.
_JOINTS = "┌┐└┘├┤┬┴┼┏┓┗┛┣┫┳┻╋┡┩┢┪╇╈┠┨┯┷┿╂╔╗╚╝╠╣╦╩╬╒╕╘╛╞╡╤╧╪╓╖╙╜╟╢╥╨╫"
_HORIZONTALS = "─━═┄┅┈┉╌╍"
# A row drawn with box bars: one opens it (after indentation or a quote's '>').
_BOX_ROW = regex.compile(rf"^(?P<lead>[\s>]*+)[{_BARS}].*[{_BARS}]\s*$")
# A rule of box characters: a corner or joint at each end, horizontals between (the ends
# and the horizontal are checked apart: classes that overlap, each under a star, backtrack
# in the square of a long line's length).
_BOX_RULE = regex.compile(rf"^(?P<lead>[\s>]*+)(?=[{_JOINTS}])[{_JOINTS}{_HORIZONTALS}\s]*+$")
_A_HORIZONTAL = regex.compile(rf"[{_HORIZONTALS}]")
# tabulate's ASCII rule: '+' at each end and between columns, '-' or '=' between ('+:---+'
# where a column is aligned).
# (possessive: a line of a megabyte of '+-----' that does not end in '+' fails at once)
_PLUS_RULE = regex.compile(r"^(?P<lead>[\s>]*+)\+(?:[-=:]{3,}+\+)++\s*+$")
_TO_PIPE = str.maketrans(
    {**dict.fromkeys(_BARS + _JOINTS, "|"), **dict.fromkeys(_HORIZONTALS, "-"), "+": "|", "=": "-"}
)
_BARS_TO_PIPE = {ord(c): "|" for c in _BARS}
# What is worth the look at all: a box character, or a '+' rule's start.
_CHEAP = regex.compile(rf"[{_BARS}{_JOINTS}]|^[\s>]*\+[-=:]")


def unboxed(line: str) -> str:
    """The line as a pipe table's row or rule where it is one drawn with boxes; any other
    line as it is."""
    if _CHEAP.search(line) is None:
        return line
    for shape in (_BOX_ROW, _BOX_RULE, _PLUS_RULE):
        m = shape.match(line)
        if m is None:
            continue
        body = line[m.end("lead") :].rstrip()
        if shape is _BOX_RULE and (body[-1] not in _JOINTS or not _A_HORIZONTAL.search(body)):
            continue
        if shape is _BOX_ROW:
            return m.group("lead") + body.translate(_BARS_TO_PIPE)
        return m.group("lead") + body.replace(" ", "").translate(_TO_PIPE)
    return line


__all__ = ["unboxed"]
