/// A problem in a config file, always with the file and line so the user can go straight to it.
public struct ConfigError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var line: Int
    public var message: String
    public init(path: String, line: Int, message: String) { self.path = path; self.line = line; self.message = message }
    /// "path:line: message", the shape compilers and systemd use.
    public var description: String { line > 0 ? "\(path):\(line): \(message)" : "\(path): \(message)" }
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
}

/// systemd-style INI: `[Section]` or `[Section ARG]`, `Key=value`, comments starting with `#` or `;`.
public enum Ini {
    public static func parse(_ text: String, path: String) throws(ConfigError) -> [IniSection] {
        var sections: [IniSection] = []
        var lineNo = 0
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNo += 1
            let line = raw.trimmingSpaces
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count >= 3 else {
                    throw ConfigError(path: path, line: lineNo, message: "malformed section header '\(line)'")
                }
                let inner = line.dropFirst().dropLast().trimmingSpaces
                let parts = inner.split(separator: " ", maxSplits: 1)
                guard let name = parts.first, !name.isEmpty else {
                    throw ConfigError(path: path, line: lineNo, message: "empty section name")
                }
                let arg = parts.count > 1 ? parts[1].trimmingSpaces : nil
                sections.append(IniSection(name: String(name), argument: arg, path: path, line: lineNo, entries: []))
                continue
            }
            guard let eq = line.firstIndex(of: "=") else {
                throw ConfigError(path: path, line: lineNo, message: "expected 'Key=value' or '[Section]', got '\(line)'")
            }
            let key = line[..<eq].trimmingSpaces
            let value = line[line.index(after: eq)...].trimmingSpaces
            guard !key.isEmpty else { throw ConfigError(path: path, line: lineNo, message: "missing key before '='") }
            guard !sections.isEmpty else {
                throw ConfigError(path: path, line: lineNo, message: "'\(key)=' appears before any [Section]")
            }
            sections[sections.count - 1].entries.append(IniEntry(key: key, value: value, line: lineNo))
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

extension StringProtocol {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\r" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\r" { s = s.dropLast() }
        return String(s)
    }
}
