// SPDX-License-Identifier: LGPL-2.1-or-later
/// Shell-style glob (`*`, `?`, `[...]` with ranges and `!`/`^` negation), as fnmatch(3) without flags.
/// Written here because the core imports no C module.
public struct Glob: Equatable, Sendable {
    public let pattern: String
    private let p: [Unicode.Scalar]

    public struct Invalid: Error, Equatable {
        public let message: String
    }

    public init(_ pattern: String) throws(Invalid) {
        self.pattern = pattern
        p = Array(pattern.unicodeScalars)
        var i = 0
        while i < p.count {
            if p[i] == "\\" { i += 2; continue }
            if p[i] == "[" {
                guard let end = Glob.classEnd(p, from: i) else {
                    throw Invalid(message: "unclosed '[' in glob \(ConfigError.quote(pattern))")
                }
                i = end + 1
                continue
            }
            i += 1
        }
    }

    public var isLiteral: Bool { !p.contains { $0 == "*" || $0 == "?" || $0 == "[" || $0 == "\\" } }

    /// Index of the `]` closing the class that opens at `start`, or nil.
    private static func classEnd(_ p: [Unicode.Scalar], from start: Int) -> Int? {
        var j = start + 1
        if j < p.count, p[j] == "!" || p[j] == "^" { j += 1 }
        if j < p.count, p[j] == "]" { j += 1 }
        while j < p.count {
            if p[j] == "]" { return j }
            j += 1
        }
        return nil
    }

    public func matches(_ text: String) -> Bool {
        let t = Array(text.unicodeScalars)
        // Iterative matcher with single-star backtracking: linear in practice, no recursion.
        var pi = 0, ti = 0
        var starP = -1, starT = 0
        while ti < t.count {
            if pi < p.count {
                let c = p[pi]
                if c == "*" { starP = pi; starT = ti; pi += 1; continue }
                if c == "?" { pi += 1; ti += 1; continue }
                if c == "[", let end = Glob.classEnd(p, from: pi) {
                    if classMatches(p[(pi + 1)..<end], t[ti]) { pi = end + 1; ti += 1; continue }
                } else if c == "\\", pi + 1 < p.count {
                    if p[pi + 1] == t[ti] { pi += 2; ti += 1; continue }
                } else if c == t[ti] {
                    pi += 1; ti += 1; continue
                }
            }
            guard starP >= 0 else { return false }
            pi = starP + 1
            starT += 1
            ti = starT
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }

    private func classMatches(_ body: ArraySlice<Unicode.Scalar>, _ c: Unicode.Scalar) -> Bool {
        var items = Array(body)
        var negate = false
        if let first = items.first, first == "!" || first == "^" { negate = true; items.removeFirst() }
        var matched = false
        var k = 0
        while k < items.count {
            if k + 2 < items.count, items[k + 1] == "-" {
                if items[k].value <= c.value && c.value <= items[k + 2].value { matched = true }
                k += 3
            } else {
                if items[k] == c { matched = true }
                k += 1
            }
        }
        return matched != negate
    }
}
