// SPDX-License-Identifier: LGPL-2.1-or-later
/// How the report learns what an app was refused (docs/PRIVACY.md): the rules that reject a tagged app's packet for
/// being denied (enforcement's `chain deny`) or over its budget (counting's `over_out`) first log it to the report's
/// NFLOG group (`UsageRules.reportLogGroup`, the DNS answers' group), with the connection's tag as the packet's mark
/// and the reason in the prefix. Waiting for an answer (`ask`) is learnt from the prompt's own group already.
///
/// Rate-limited in the kernel, per app and in all, so a flood of refused packets costs the loop a bounded number of
/// messages a second: past the limits attempts are not counted (the count is of the attempts seen).
public enum ReportRefusals {
    /// Each app's refusals logged: at most `perApp` a second (after a burst of `burst`), and `total` a second in all.
    static let perApp = "limit rate 10/second burst 20 packets"
    static let total = "limit rate 200/second burst 100 packets"
    /// The dynamic set that keeps each tag's limit (in each of the two tables): an app quiet for a minute goes.
    static let setName = "report_refused"
    static let set = "type mark; size 65535; flags dynamic,timeout; timeout 1m;"
    /// An IPv6 header and the ports: where the packet was going.
    static let snaplen = 64
    static let prefixHead = "netpermd:refused:"

    public static func prefix(_ r: ReportRefusal) -> String { prefixHead + r.rawValue }

    /// The rule that logs a tagged connection's packet refused for `reason` (placed before the rule that rejects it).
    /// The packet's own mark is overwritten: it is rejected next, so nothing else reads it.
    static func rule(_ reason: ReportRefusal) -> String {
        "\(UsageRules.tagged) meta mark set ct mark update @\(setName) { ct mark \(perApp) } \(total) "
            + "log prefix \"\(prefix(reason))\" group \(UsageRules.reportLogGroup) snaplen \(snaplen)"
    }

    /// The set's declaration inside a table's block (enforcement's text).
    static var setText: String {
        "\tset \(setName) {\n\t\ttype mark\n\t\tsize 65535\n\t\tflags dynamic,timeout\n\t\ttimeout 1m\n\t}\n"
    }

    /// A logged refusal: its reason by the prefix, its app by the mark, where it was going by its first bytes (an
    /// IPv4 or IPv6 header, and the ports for TCP and UDP). Nil for any other prefix, an untagged mark, or a packet
    /// too short to say.
    public static func sighting(prefix: String, mark: UInt32?, outIndex: Int32?, payload p: [UInt8]) -> ReportSighting? {
        guard prefix.hasPrefix(prefixHead), let reason = ReportRefusal(rawValue: String(prefix.dropFirst(prefixHead.count))),
              let mark, ReportLabels.isTag(mark), let first = p.first else { return nil }
        let proto: UInt8, transport: Int, address: String?
        switch first >> 4 {
        case 4:
            transport = Int(first & 0xF) * 4
            guard p.count >= 20, transport >= 20 else { return nil }
            (proto, address) = (p[9], AddressText.text(p[16..<20]))
        case 6:
            guard p.count >= 40 else { return nil }
            (proto, transport, address) = (p[6], 40, AddressText.text(p[24..<40]))
        default:
            return nil
        }
        guard let address else { return nil }
        let ported = (proto == 6 || proto == 17) && p.count >= transport + 4
        let port = ported ? UInt16(p[transport + 2]) << 8 | UInt16(p[transport + 3]) : 0
        return .refused(tag: mark, address: address, port: port, proto: proto, ifindex: outIndex, reason: reason)
    }
}
