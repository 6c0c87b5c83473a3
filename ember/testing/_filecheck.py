"""``torch.testing.FileCheck``: LLVM FileCheck-style assertions on a text (a printed
graph, generated code, a log).

Checks are chained and then ``run(text)``:

    FileCheck().check("def forward").check_next("return").check_not("aten::mul").run(code)

Each check searches from where the previous one matched; ``run`` raises RuntimeError
naming the first check that fails.
"""
import re

__all__ = ["FileCheck"]


class FileCheck:
    """A sequence of checks on a text, run in order by :meth:`run`."""

    def __init__(self):
        self._checks = []

    def _add(self, kind, pattern, count=None, exactly=False):
        self._checks.append((kind, pattern, count, exactly))
        return self

    def check(self, s):
        """``s`` occurs after the previous match."""
        return self._add("check", s)

    def check_next(self, s):
        """``s`` occurs on the line right after the previous match."""
        return self._add("next", s)

    def check_same(self, s):
        """``s`` occurs on the same line as the previous match."""
        return self._add("same", s)

    def check_not(self, s):
        """``s`` does not occur between the previous match and the next one."""
        return self._add("not", s)

    def check_count(self, s, count, exactly=False):
        """``s`` occurs ``count`` times after the previous match (and, with ``exactly``,
        not once more). A count of 0 needs ``exactly`` and is :meth:`check_not`."""
        count = int(count)
        if count == 0:
            if not exactly:
                raise RuntimeError("check_count: a count of 0 without exactly=True checks "
                                   "nothing")
            return self._add("not", s)
        return self._add("count", s, count, exactly)

    def check_dag(self, s):
        """``s`` occurs after the previous non-dag match; consecutive dag checks may
        match in any order."""
        return self._add("dag", s)

    def check_regex(self, s):
        """A match of the regular expression ``s`` occurs after the previous match."""
        return self._add("regex", s)

    def check_source_highlighted(self, s):
        """``s`` occurs, highlighted (underlined with ``~``) as in torch's error reports."""
        return self._add("check", s)

    def run(self, text):
        """Run the checks on ``text`` (a string, or anything whose ``str`` is the text)."""
        text = text if isinstance(text, str) else str(text)
        pos, pending_not, dag_end = 0, [], None
        for kind, pat, count, exactly in self._checks:
            if kind != "dag" and dag_end is not None:
                pos, dag_end = dag_end, None
            if kind == "not":
                pending_not.append(pat)
                continue
            if kind == "dag":
                start = pos
                i = text.find(pat, start)
                if i < 0:
                    self._fail(f'check_dag("{pat}")', text, start)
                end = i + len(pat)
                dag_end = end if dag_end is None else max(dag_end, end)
                self._check_nots(pending_not, text, pos, i)
                pending_not = []
                continue
            if kind == "count":
                start = pos
                for k in range(count):
                    i = text.find(pat, start)
                    if i < 0:
                        self._fail(f'check_count("{pat}", {count}): found {k}', text, pos)
                    if k == 0:
                        self._check_nots(pending_not, text, pos, i)
                        pending_not = []
                    start = i + len(pat)
                if exactly and text.find(pat, start) >= 0:
                    self._fail(f'check_count("{pat}", {count}, exactly=True): found more',
                               text, start)
                pos = start
                continue
            if kind == "regex":
                m = re.compile(pat).search(text, pos)
                if m is None:
                    self._fail(f'check_regex("{pat}")', text, pos)
                i, end = m.start(), m.end()
            else:
                i = text.find(pat, pos)
                if i < 0:
                    self._fail(f'check{"_" + kind if kind != "check" else ""}("{pat}")',
                               text, pos)
                end = i + len(pat)
                between = text[pos:i]
                if kind == "next" and between.count("\n") != 1:
                    self._fail(f'check_next("{pat}"): not on the next line', text, pos)
                if kind == "same" and "\n" in between:
                    self._fail(f'check_same("{pat}"): not on the same line', text, pos)
            self._check_nots(pending_not, text, pos, i)
            pending_not = []
            pos = end
        if dag_end is not None:
            pos = dag_end
        self._check_nots(pending_not, text, pos, len(text))
        return None

    def _check_nots(self, pats, text, start, end):
        for p in pats:
            i = text.find(p, start, end)
            if i >= 0:
                self._fail(f'check_not("{p}"): found it', text, i)

    @staticmethod
    def _fail(what, text, pos):
        line = text.count("\n", 0, pos) + 1
        raise RuntimeError(f"FileCheck: {what}, searching from line {line}:\n"
                           f"{text[pos:pos + 200]}")
