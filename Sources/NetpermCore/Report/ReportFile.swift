// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// The report file (`STATE_DIR/report`): one line per entry, read back at start, so that a restart or an upgrade
/// keeps the days kept. Compact (about 100 bytes an entry: 7 days of 1,000 destinations are 700 KB) and readable.
///
/// ```
/// # netpermd's privacy report, written by the daemon (docs/PRIVACY.md).
/// version 2
/// person 1000
/// entry 20428 maps 1000 wwan m tiles.example.org 192.0.2.7 443 6 1764950000 1764953600 12 880123 0 1 0 1764950100 1764950100
/// ```
///
/// An `entry` is: day, app, uid (`-`: the machine's), kind, flags (`m` metered, `r` roaming, `-` neither), host,
/// address, port, protocol, first and last time, connections, bytes, refusals denied, ask and budget, and the first
/// and last refusal's times (0: none; version 1 had no such times: its refusals take the entry's). Hosts and
/// addresses are printable ASCII without spaces (`DNSName` escapes every other byte), so a line is always one line.
extension ReportBook {
    public static let fileVersion = 2

    public func encoded() -> String {
        var out = "# netpermd's privacy report, written by the daemon (docs/PRIVACY.md).\nversion \(Self.fileVersion)\n"
        for uid in people.sorted() { out += "person \(uid)\n" }
        for (k, e) in rows() {
            let flags = (k.link.metered ? "m" : "") + (k.link.roaming ? "r" : "")
            out += "entry \(k.day) \(k.owner.app) \(k.owner.uid.map(String.init) ?? "-") \(k.link.kind.rawValue) "
                + "\(flags.isEmpty ? "-" : flags) \(k.host) \(e.address) \(e.port) \(e.proto) \(e.first) \(e.last) "
                + "\(e.connections) \(e.bytes) \(e.denied) \(e.ask) \(e.budget) \(e.refusedFirst) \(e.refusedLast)\n"
        }
        return out
    }

    /// The file's content; `settings` bound it as the policy does (days past `Days=`, entries past the limit).
    public static func parse(_ text: String, path: String, limits: Limits = Limits()) throws(ConfigError) -> ReportBook {
        var kept: [ReportKey: ReportEntry] = [:]
        var people: Set<UInt32> = []
        var line = 0, version = fileVersion
        func fail(_ message: String) -> ConfigError { ConfigError(path: path, line: line, message: message) }
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            line += 1
            if raw.isEmpty || raw.hasPrefix("#") { continue }
            let w = raw.split(separator: " ").map(String.init)
            switch w.first {
            case "version":
                guard w.count == 2, let v = Int(w[1]), (1...fileVersion).contains(v) else { throw fail("unknown version") }
                version = v
            case "person":
                guard w.count == 2, let uid = UInt32(w[1]) else { throw fail("expected person UID") }
                people.insert(uid)
            case "entry":
                guard let (k, e) = entry(w, version: version) else {
                    throw fail("expected entry DAY APP UID KIND FLAGS HOST ADDRESS PORT PROTO FIRST LAST CONNECTIONS BYTES "
                        + "DENIED ASK BUDGET" + (version > 1 ? " REFUSED-FIRST REFUSED-LAST" : ""))
                }
                kept[k] = e
            default:
                throw fail("unknown line \(ConfigError.quote(String(raw.prefix(64))))")
            }
        }
        var book = ReportBook(limits: limits)
        book.restore(kept, people: people)
        return book
    }

    private static func entry(_ w: [String], version: Int) -> (ReportKey, ReportEntry)? {
        guard w.count == (version > 1 ? 19 : 17), let day = Int(w[1]), AppPolicy.isValidID(w[2]), let kind = LinkKind(rawValue: w[4]),
              ["-", "m", "r", "mr"].contains(w[5]), DNSName.isShowable(w[6]), DNSName.isShowable(w[7]),
              let port = UInt16(w[8]), let proto = UInt8(w[9]), let first = Int(w[10]), let last = Int(w[11]) else {
            return nil
        }
        var uid: UInt32?
        if w[3] != "-" {
            guard let u = UInt32(w[3]) else { return nil }
            uid = u
        }
        let counts = w[12...16].compactMap { UInt64($0) }
        guard counts.count == 5 else { return nil }
        let link = ReportLink(kind: kind, metered: w[5].contains("m"), roaming: w[5].contains("r"))
        var e = ReportEntry(address: w[7], port: port, proto: proto, first: first, last: last)
        (e.connections, e.bytes, e.denied, e.ask, e.budget) = (counts[0], counts[1], counts[2], counts[3], counts[4])
        if version > 1 {
            guard let rf = Int(w[17]), let rl = Int(w[18]) else { return nil }
            (e.refusedFirst, e.refusedLast) = (rf, rl)
        } else if e.refused > 0 {
            (e.refusedFirst, e.refusedLast) = (first, last)
        }
        return (ReportKey(owner: ReportOwner(app: w[2], uid: uid), day: day, host: w[6], link: link), e)
    }
}
