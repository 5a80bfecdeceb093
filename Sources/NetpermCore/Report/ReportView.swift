// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// The report as REPORT answers it: an owner's entries of every day kept, merged per destination and class of link
/// (the days are how the report rolls, not what a person reads): first and last times across them, counts summed,
/// the last address reached.
public struct ReportRow: Equatable, Sendable {
    public var owner: ReportOwner
    public var host: String
    public var link: ReportLink
    public var entry: ReportEntry

    public func write(to w: inout JSONWriter) {
        w.field("host", host)
        // A name the app resolved, or (nil) the address alone: the name could not be known.
        w.field("named", IPAddress(host) == nil)
        w.field("address", entry.address)
        w.field("port", Int(entry.port))
        w.field("protocol", Self.protocolName(entry.proto))
        w.field("kind", link.kind.rawValue)
        w.field("metered", link.metered)
        w.field("roaming", link.roaming)
        w.field("first", entry.first)
        w.field("last", entry.last)
        w.field("connections", entry.connections)
        w.field("bytes", entry.bytes)
        w.object("refused") { r in
            r.field("denied", entry.denied)
            r.field("ask", entry.ask)
            r.field("budget", entry.budget)
            // When they were, apart from the connections' `first` and `last`; null when none.
            r.field("first", entry.refused > 0 ? entry.refusedFirst : nil)
            r.field("last", entry.refused > 0 ? entry.refusedLast : nil)
        }
    }

    /// "tcp", "udp", "icmp", "ipv6-icmp", or the number; "" where a refusal's protocol was not read.
    static func protocolName(_ p: UInt8) -> String {
        switch p {
        case 0: return ""
        case 1: return "icmp"
        case 6: return "tcp"
        case 17: return "udp"
        case 58: return "ipv6-icmp"
        default: return String(p)
        }
    }
}

public enum ReportView {
    /// `rows` in ReportBook's order (owner, host, link, day): each run of days of one destination and link as one.
    public static func merge(_ rows: [(key: ReportKey, entry: ReportEntry)]) -> [ReportRow] {
        var out: [ReportRow] = []
        for (k, e) in rows {
            if var last = out.last, last.owner == k.owner, last.host == k.host, last.link == k.link {
                var m = last.entry
                if e.last >= m.last { (m.address, m.port, m.proto) = (e.address, e.port, e.proto) }
                m.first = min(m.first, e.first)
                m.last = max(m.last, e.last)
                m.connections &+= e.connections
                m.bytes &+= e.bytes
                m.denied &+= e.denied
                m.ask &+= e.ask
                m.budget &+= e.budget
                if e.refused > 0 { m.refused(at: e.refusedFirst, e.refusedLast) }
                last.entry = m
                out[out.count - 1] = last
            } else {
                out.append(ReportRow(owner: k.owner, host: k.host, link: k.link, entry: e))
            }
        }
        return out
    }

    /// Rows grouped by owner, in order.
    public static func byOwner(_ rows: [ReportRow]) -> [(owner: ReportOwner, rows: [ReportRow])] {
        var out: [(owner: ReportOwner, rows: [ReportRow])] = []
        for r in rows {
            if out.last?.owner == r.owner { out[out.count - 1].rows.append(r) } else { out.append((r.owner, [r])) }
        }
        return out
    }
}
