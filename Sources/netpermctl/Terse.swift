// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// Output for scripts, like `nmcli -t`: no headers, no alignment. Tables print one line per row with fields
/// separated by ':'; the other commands print key:value lines. A ':' or '\' inside a value is escaped with '\'
/// (IPv6 addresses and policy errors contain ':'), so splitting on unescaped ':' always works. Every field is
/// always there, empty when there is nothing to say; lists are separated by ','.
enum Terse {
    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            if c == ":" || c == "\\" { out.append("\\") }
            out.append(c)
        }
        return out
    }

    /// One line's fields, without the newline.
    static func fields(_ values: [String]) -> String {
        values.map(escape).joined(separator: ":")
    }

    static func row(_ values: [String]) -> String { fields(values) + "\n" }

    /// The values of `keys`, in that order, as one row: tables show a subset of a record's key:value fields.
    static func row(_ fields: [(String, String)], _ keys: [String]) -> String {
        row(keys.map { key in fields.first { $0.0 == key }?.1 ?? "" })
    }

    static func lines(_ fields: [(String, String)]) -> String {
        fields.map { "\($0.0):\(escape($0.1))\n" }.joined()
    }

    static func yesNo(_ b: Bool) -> String { b ? "yes" : "no" }

    /// A reply's value as a field: strings as they are, yes/no, numbers, lists joined by ',', null empty.
    static func value(_ v: JSON?) -> String {
        switch v {
        case nil, .null?: return ""
        case let .bool(b)?: return yesNo(b)
        case let .int(i)?: return String(i)
        case let .string(s)?: return s
        case let .array(a)?: return a.map { value($0) }.joined(separator: ",")
        case let .object(members)?: return JSON.object(members).encoded()
        }
    }
}
