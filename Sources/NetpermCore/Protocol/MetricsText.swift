// SPDX-License-Identifier: LGPL-2.1-or-later
/// Prometheus' text exposition format (0.0.4), as `promtool check metrics` and node_exporter's textfile collector
/// read it: each family once, `# HELP` and `# TYPE` before its samples. Names follow Prometheus' conventions, which
/// the writer holds every name to: a `netpermd_` prefix, snake case, `_total` on counters and only on them.
public struct MetricsText: Sendable {
    public enum Kind: String, Sendable { case counter, gauge }

    public private(set) var text = ""
    private var families: Set<String> = []
    private var current: String?

    public init() {}

    /// Starts a family; its samples follow with `sample`.
    public mutating func family(_ name: String, _ kind: Kind, _ help: String) {
        precondition(Self.isName(name) && name.hasPrefix("netpermd_"), "metric name '\(name)'")
        precondition(name.hasSuffix("_total") == (kind == .counter), "\(name): _total is for counters, and counters only")
        precondition(families.insert(name).inserted, "metric family \(name) written twice")
        current = name
        text += "# HELP \(name) \(Self.escape(help, quotes: false))\n# TYPE \(name) \(kind.rawValue)\n"
    }

    /// One sample of the family just started.
    public mutating func sample(_ value: Int, _ labels: KeyValuePairs<String, String> = [:]) {
        write(String(value), labels)
    }

    public mutating func sample(count value: UInt64, _ labels: KeyValuePairs<String, String> = [:]) {
        write(String(value), labels)
    }

    public mutating func sample(_ value: Bool, _ labels: KeyValuePairs<String, String> = [:]) {
        write(value ? "1" : "0", labels)
    }

    public mutating func sample(seconds value: Double, _ labels: KeyValuePairs<String, String> = [:]) {
        // Whole seconds print without an exponent (Swift writes 1.7e9 for large Doubles).
        write(value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value), labels)
    }

    private mutating func write(_ value: String, _ labels: KeyValuePairs<String, String>) {
        guard let name = current else { preconditionFailure("a sample before its family") }
        text += name
        if !labels.isEmpty {
            text += "{"
            text += labels.map { l in
                precondition(Self.isName(l.key) && !l.key.hasPrefix("__"), "label name '\(l.key)'")
                return "\(l.key)=\"\(Self.escape(l.value, quotes: true))\""
            }.joined(separator: ",")
            text += "}"
        }
        text += " \(value)\n"
    }

    /// `[a-z_][a-z0-9_]*`: Prometheus allows capitals and colons too, its conventions do not.
    static func isName(_ s: String) -> Bool {
        guard let first = s.utf8.first, first == UInt8(ascii: "_") || (first >= 0x61 && first <= 0x7A) else { return false }
        return s.utf8.allSatisfy { $0 == UInt8(ascii: "_") || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) }
    }

    /// Backslash and newline (and in label values the double quote) are the format's only escapes.
    static func escape(_ s: String, quotes: Bool) -> String {
        guard s.utf8.contains(where: { $0 == 0x5C || $0 == 0x0A || (quotes && $0 == 0x22) }) else { return s }
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\"" where quotes: out += "\\\""
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}
