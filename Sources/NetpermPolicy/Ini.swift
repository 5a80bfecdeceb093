// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// A problem in a config file, always with the file and line so the user can go straight to it. A warning is
/// something ignored (an unknown section or key); an error makes the whole policy invalid.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Severity: Equatable, Sendable { case error, warning }

    public var path: String
    public var line: Int
    /// The section the line is in, as messages name it (`[App maps]`, already cut and escaped); nil for a problem
    /// outside any section (a malformed header, an unreadable file).
    public var section: String?
    public var message: String
    public var severity: Severity

    /// `message` is cut (with the section, to `messageLimit` bytes) and escaped: whatever a caller quoted, the
    /// error stays short and on one line.
    public init(path: String, line: Int, section: String? = nil, message: String, severity: Severity = .error) {
        self.path = path; self.line = line; self.section = section; self.severity = severity
        let room = ConfigError.messageLimit - (section.map { $0.utf8.count + 2 } ?? 0)
        self.message = SafeText.excerpt(message, maxBytes: max(room, ConfigError.quoteLimit))
    }

    /// "path:line: [Section]: message", the shape compilers and systemd use; warnings say so after the line, as
    /// compilers do, so a log or a terminal tells them from errors without colours. The path is escaped and cut
    /// like a quote (a drop-in's name is anyone's choice who may write the directory): the whole is at most about
    /// `pathLimit` + `messageLimit` + 30 bytes.
    public var description: String {
        let shown = SafeText.excerpt(path, maxBytes: ConfigError.pathLimit)
        let place = line > 0 ? "\(shown):\(line): " : "\(shown): "
        switch severity {
        case .error: return place + text
        case .warning: return place + "warning: " + text
        }
    }

    /// The message after the section that it is in: "[App maps]: bad value ...".
    public var text: String { (section.map { $0 + ": " } ?? "") + message }

    /// How many bytes of a value a message quotes (escaped, before the "..." that says it was cut).
    public static let quoteLimit = SafeText.quoteLimit
    /// The longest message, whatever it quotes: a message quotes a value, a section header and a hint at most.
    public static let messageLimit = 240
    /// The longest path a description shows.
    public static let pathLimit = 200

    /// `s` in single quotes for a message: see `clip`.
    public static func quote(_ s: some StringProtocol) -> String { "'" + clip(s) + "'" }

    /// At most `quoteLimit` bytes of `s`, escaped (`SafeText`), cut between characters, then "..." if there was
    /// more: a 10 MB line or a file of NUL bytes still makes a short message on one line.
    public static func clip(_ s: some StringProtocol) -> String { SafeText.excerpt(s, maxBytes: quoteLimit) }
}

/// What one parse found, cheap however broken the input: only the first `limit` errors and the first `limit`
/// warnings are kept (and their messages formatted); the rest are only counted.
struct ConfigProblems {
    let limit: Int
    private(set) var kept: [ConfigError] = []
    private(set) var errorCount = 0
    private(set) var warningCount = 0
    private var keptErrors = 0, keptWarnings = 0

    init(limit: Int) { self.limit = max(1, limit) }

    mutating func error(_ path: String, _ line: Int, in section: String? = nil, _ message: @autoclosure () -> String) {
        errorCount += 1
        guard keptErrors < limit else { return }
        keptErrors += 1
        kept.append(ConfigError(path: path, line: line, section: section, message: message()))
    }

    mutating func warning(_ path: String, _ line: Int, in section: String? = nil,
                          _ message: @autoclosure () -> String) {
        warningCount += 1
        guard keptWarnings < limit else { return }
        keptWarnings += 1
        kept.append(ConfigError(path: path, line: line, section: section, message: message(), severity: .warning))
    }

    /// File order: the files as given, then by line; problems on one line keep the order they were found in.
    /// Only the checks made after every file was read (an [App] with no identity) come out of order.
    mutating func sort(files: [String]) {
        var rank: [String: Int] = [:]
        for (i, p) in files.enumerated() where rank[p] == nil { rank[p] = i }
        kept = kept.enumerated().sorted { a, b in
            let fa = rank[a.element.path] ?? Int.max, fb = rank[b.element.path] ?? Int.max
            if fa != fb { return fa < fb }
            if a.element.line != b.element.line { return a.element.line < b.element.line }
            return a.offset < b.offset
        }.map(\.element)
    }
}

public struct IniEntry: Equatable, Sendable {
    public var key: String
    public var value: String
    public var line: Int
}

public struct IniSection: Equatable, Sendable {
    /// "Interface" in `[Interface wlan*]`.
    public var name: String
    /// "wlan*" in `[Interface wlan*]`; nil when the header has no argument.
    public var argument: String?
    public var path: String
    public var line: Int
    public var entries: [IniEntry]

    /// The header as messages name it, `[Interface wlan*]`, cut short like a quoted value.
    public var label: String { IniSection.label(name, argument) }

    static func label(_ name: String, _ argument: String?) -> String {
        "[" + ConfigError.clip(argument.map { "\(name) \($0)" } ?? name) + "]"
    }
}

/// systemd-style INI: `[Section]` or `[Section ARG]`, `Key=value`, comments starting with `#` or `;`.
public enum Ini {
    /// The sections, or the first malformed line.
    public static func parse(_ text: String, path: String) throws(ConfigError) -> [IniSection] {
        var problems = ConfigProblems(limit: 1)
        let sections = parse(text, path: path, into: &problems)
        if let first = problems.kept.first { throw first }
        return sections
    }

    /// Every well-formed section; each malformed line is an error in `problems`, and parsing goes on after it.
    static func parse(_ text: String, path: String, into problems: inout ConfigProblems) -> [IniSection] {
        var text = text
        // Bytes, not Characters: a file of 16 MB (the read limit) must not take seconds to reject.
        return text.withUTF8 { parse(bytes: $0, path: path, into: &problems) }
    }

    private static func parse(bytes: UnsafeBufferPointer<UInt8>, path: String,
                              into problems: inout ConfigProblems) -> [IniSection] {
        typealias Bytes = Slice<UnsafeBufferPointer<UInt8>>
        func string(_ b: Bytes) -> String { String(decoding: UnsafeBufferPointer(rebasing: b), as: UTF8.self) }
        // One byte more than quoteLimit, so clip still sees that a longer line was cut.
        func quote(_ b: Bytes) -> String { ConfigError.quote(string(b.prefix(ConfigError.quoteLimit + 1))) }
        func trim(_ b: Bytes) -> Bytes {
            var b = b
            while let f = b.first, f == 0x20 || f == 0x09 || f == 0x0D { b = b.dropFirst() }
            while let l = b.last, l == 0x20 || l == 0x09 || l == 0x0D { b = b.dropLast() }
            return b
        }

        var sections: [IniSection] = []
        // After a bad header, its lines belong to no section: they are skipped, not added to the one before.
        var inBadSection = false
        var lineNo = 0
        var start = 0
        // Lines inside a section name it.
        func within() -> String? { inBadSection ? nil : sections.last?.label }
        while start <= bytes.count {
            // One pass finds the line's end and its first '=' (a second pass costs seconds in a debug build).
            var end = start
            var eq: Int?
            while end < bytes.count {
                let b = bytes[end]
                if b == 0x0A { break }
                if b == UInt8(ascii: "="), eq == nil { eq = end }
                end += 1
            }
            lineNo += 1
            let line = trim(bytes[start..<end])
            start = end + 1
            guard let first = line.first, first != UInt8(ascii: "#"), first != UInt8(ascii: ";") else { continue }
            if first == UInt8(ascii: "[") {
                guard line.last == UInt8(ascii: "]"), line.count >= 3 else {
                    problems.error(path, lineNo, "malformed section header \(quote(line))")
                    inBadSection = true
                    continue
                }
                let inner = trim(line.dropFirst().dropLast())
                guard !inner.isEmpty else {
                    problems.error(path, lineNo, "empty section name \(quote(line))")
                    inBadSection = true
                    continue
                }
                let space = inner.firstIndex { $0 == 0x20 || $0 == 0x09 } ?? inner.endIndex
                let arg = trim(inner[space...])
                sections.append(IniSection(name: string(inner[..<space]), argument: arg.isEmpty ? nil : string(arg),
                                           path: path, line: lineNo, entries: []))
                inBadSection = false
                continue
            }
            guard let eq else {
                problems.error(path, lineNo, in: within(), "expected 'Key=value' or '[Section]', got \(quote(line))")
                continue
            }
            let key = trim(line[..<eq])
            guard !key.isEmpty else {
                problems.error(path, lineNo, in: within(), "missing key before '=' in \(quote(line))")
                continue
            }
            if inBadSection { continue }
            guard !sections.isEmpty else {
                problems.error(path, lineNo, "'\(ConfigError.clip(string(key.prefix(ConfigError.quoteLimit + 1))))=' appears before any [Section]")
                continue
            }
            sections[sections.count - 1].entries.append(
                IniEntry(key: string(key), value: string(trim(line[(eq + 1)...])), line: lineNo))
        }
        return sections
    }

    public static func parseBool(_ s: String) -> Bool? {
        switch s.lowercased() {
        case "yes", "true", "on", "1": return true
        case "no", "false", "off", "0": return false
        default: return nil
        }
    }
}
