#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Lists functions longer than 80 lines and types with more than 15 stored properties (issue 52).

Scans Sources/**/*.swift and gio/*.c with a brace count over the text with comments and string literals blanked
(a parser would be exact; the project's code is regular enough that counting braces is). A function's length is
its lines from the declaration to its closing brace. Prints one offender a line, `KIND NAME COUNT PATH:LINE`, and
exits 1 when any offender is not in the allow-list file given with --allow (one `KIND NAME` a line, `#` comments),
or when an allow-listed one no longer offends (so the list shrinks as the owners fix theirs).
"""
import argparse
import os
import re
import sys

MAX_LINES = 80
MAX_STORED = 15


def blank(text, swift):
    """The text with comments and the insides of string literals replaced by spaces, newlines kept."""
    out = []
    i, n = 0, len(text)
    # A stack of string contexts: (closing quote, raw hashes, interpolation paren depth or None).
    stack = []

    def keep(s):
        out.append(s)

    def hide(s):
        out.append(re.sub(r"[^\n]", " ", s))

    while i < n:
        if stack and stack[-1][2] is None:  # inside a string literal
            close, hashes, _ = stack[-1]
            if text.startswith(close + hashes, i):
                hide(close + hashes)
                i += len(close) + len(hashes)
                stack.pop()
                continue
            if text[i] == "\\" and text.startswith("\\" + hashes + "(", i) and swift:
                hide("\\" + hashes + "(")
                i += len(hashes) + 2
                stack[-1] = (close, hashes, 1)
                continue
            if text[i] == "\\" and not hashes:
                hide(text[i:i + 2])
                i += 2
                continue
            hide(text[i])
            i += 1
            continue
        c = text[i]
        if stack and c in "()":  # code inside an interpolation
            close, hashes, depth = stack[-1]
            depth += 1 if c == "(" else -1
            if depth == 0:
                stack[-1] = (close, hashes, None)
                hide(c)
                i += 1
                continue
            stack[-1] = (close, hashes, depth)
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            hide(text[i:j])
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            hide(text[i:j])
            i = j
            continue
        if swift:
            m = re.match(r'(#*)("""|")', text[i:i + 16])
            if m and (m.group(1) or c == '"'):
                hide(m.group(0))
                i += len(m.group(0))
                stack.append((m.group(2), m.group(1), None))
                continue
        else:
            if c == '"' or c == "'":
                j = i + 1
                while j < n and text[j] != c:
                    j += 2 if text[j] == "\\" else 1
                hide(text[i:j + 1])
                i = j + 1
                continue
        keep(c)
        i += 1
    return "".join(out)


def closing(code, open_at):
    """The index of the brace that closes the one at open_at."""
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def line_of(code, at):
    return code.count("\n", 0, at) + 1


SWIFT_FUNC = re.compile(r"\b(func\s+([^\s(<]+)|(init)[?!]?\s*[(<]|(deinit)\b|(subscript)\s*[(<])")
SWIFT_TYPE = re.compile(r"\b(class|struct|enum|actor|extension|protocol)\s+([A-Za-z_][\w.]*)")
STORED = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*((?:(?:private|fileprivate|internal|public|package|open)"
                    r"(?:\(set\))?|final|lazy|weak|unowned|nonisolated(?:\(unsafe\))?|override|static|class)\s+)*"
                    r"(let|var)\s+\w")


def swift_offenders(path, code):
    found = []
    # Types: the enclosing type of each position, for names and for stored properties.
    types = []  # (start, end, kind, name, body_open)
    for m in SWIFT_TYPE.finditer(code):
        brace = code.find("{", m.end())
        if brace < 0:
            continue
        # A `class func`/`class var` is no type; a type's header has no `(` before its brace except in generics.
        header = code[m.end():brace]
        if m.group(1) == "class" and re.match(r"\s*(func|var|let)\b", code[m.start() + 5:]):
            continue
        if ";" in header or "\n\n" in header:
            continue
        types.append((m.start(), closing(code, brace), m.group(1), m.group(2), brace))

    def owner(at):
        inner = [t for t in types if t[4] < at <= t[1]]
        return max(inner, key=lambda t: t[4]) if inner else None

    for m in SWIFT_FUNC.finditer(code):
        name = m.group(2) or m.group(3) or m.group(4) or m.group(5)
        # The body's brace: the first `{` after the signature's parentheses close.
        j, depth = m.end() - (1 if m.group(0).endswith(("(", "<")) else 0), 0
        brace = -1
        while j < len(code):
            ch = code[j]
            if ch in "(<[":
                depth += 1
            elif ch in ")>]" and not (ch == ">" and code[j - 1] == "-"):
                depth -= 1
            elif ch == "{" and depth <= 0:
                brace = j
                break
            elif ch == "\n" and depth <= 0 and code[j + 1:].lstrip().startswith(("func ", "var ", "let ", "}")):
                break  # a requirement without a body (protocols)
            j += 1
        if brace < 0:
            continue
        end = closing(code, brace)
        start_line, end_line = line_of(code, m.start()), line_of(code, end)
        lines = end_line - start_line + 1
        if lines > MAX_LINES:
            t = owner(m.start())
            qual = f"{t[3]}.{name}" if t else name
            found.append(("func", qual, lines, f"{path}:{start_line}"))

    for t in types:
        if t[2] in ("extension", "protocol"):
            continue
        body_open, body_close = t[4], t[1]
        count, depth, i = 0, 0, body_open + 1
        line_start = i
        while i < body_close:
            ch = code[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "\n":
                line_start = i + 1
            if depth == 0 and i == line_start:
                line = code[i:code.find("\n", i)]
                mm = STORED.match(line)
                if mm and not re.search(r"\b(static|class)\s", line.split(mm.group(2))[0]) and stored(line, code, i):
                    count += 1
            i += 1
        if count > MAX_STORED:
            found.append(("type", t[3], count, f"{path}:{line_of(code, t[0])}"))
    return found


def stored(line, code, at):
    """Whether the declaration on line (at code[at]) stores a value: no getter block, or only observers."""
    if "=" in line.split("{")[0]:
        return True
    if "{" not in line:
        return True
    body = code[code.find("{", at) + 1:].lstrip()
    return body.startswith(("didSet", "willSet"))


C_FUNC = re.compile(r"^(?:[A-Za-z_][\w \t*]*?[\s*])?([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{", re.M)


def c_offenders(path, code):
    found = []
    for m in C_FUNC.finditer(code):
        if m.group(1) in ("if", "for", "while", "switch", "return", "sizeof"):
            continue
        brace = m.end() - 1
        end = closing(code, brace)
        lines = line_of(code, end) - line_of(code, m.start()) + 1
        if lines > MAX_LINES:
            found.append(("func", m.group(1), lines, f"{path}:{line_of(code, m.start())}"))
    for m in re.finditer(r"^(?:typedef\s+)?struct\s*(\w*)\s*\{", code, re.M):
        end = closing(code, m.end() - 1)
        body = code[m.end():end]
        fields = sum(1 for s in body.split(";")[:-1] if s.strip() and "{" not in s)
        if fields > MAX_STORED:
            name = m.group(1) or re.match(r"\s*(\w+)", code[end + 1:]).group(1)
            found.append(("type", name, fields, f"{path}:{line_of(code, m.start())}"))
    return found


def scan(root):
    found = []
    for top, ext, fn in (("Sources", ".swift", swift_offenders), ("gio", ".c", c_offenders)):
        for d, _, files in sorted(os.walk(os.path.join(root, top))):
            for f in sorted(files):
                if f.endswith(ext):
                    p = os.path.join(d, f)
                    with open(p, encoding="utf-8") as fh:
                        found += fn(os.path.relpath(p, root), blank(fh.read(), ext == ".swift"))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--allow", help="allow-list file: `KIND NAME` a line")
    args = ap.parse_args()
    found = scan(args.root)
    allowed = set()
    if args.allow:
        with open(args.allow, encoding="utf-8") as fh:
            for line in fh:
                line = line.split("#")[0].strip()
                if line:
                    kind, name = line.split()[:2]
                    allowed.add((kind, name))
    status = 0
    for kind, name, count, where in found:
        mark = "allowed" if (kind, name) in allowed else "OFFENDS"
        status |= mark == "OFFENDS"
        print(f"{mark} {kind} {name} {count} {where}")
    for kind, name in sorted(allowed - {(k, n) for k, n, _, _ in found}):
        print(f"FIXED {kind} {name}: remove it from the allow-list")
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
