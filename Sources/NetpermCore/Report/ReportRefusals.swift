// SPDX-License-Identifier: LGPL-2.1-or-later
/// How the report learns what an app was refused (docs/PRIVACY.md): the rules that reject an app's packet for being
/// denied (enforcement's `chain deny`) or over its budget (counting's `over_out`) first jump to `refused_log`, which
/// logs it to the report's NFLOG group (`UsageRules.reportLogGroup`, the DNS answers' group) with the reason in the
/// prefix and whose it is as the packet's mark: a user's own unit's (ReportUnits) by its cgroup id's low 32 bits
/// (`ReportUnits.mark`, from the table's `report_units` map, its socket's deepest level that is one first), any
/// other by the connection's tag. Waiting for an answer (`ask`) is learnt from the prompt's own group already.
///
/// A user's unit shares its uid's tag, so the tag alone would record its refusals as its uid's app's. NFLOG's own
/// way to attach the connection (whose labels hold the unit's id, NFULNL_CFG_F_CONNTRACK) is not there: kernels are
/// built without its conntrack glue (`CONFIG_NETFILTER_NETLINK_GLUE_CT`, EOPNOTSUPP), and enforcement's rules judge
/// a new connection's first packet before `user_output` labels it.
///
/// Rate-limited in the kernel, per app (per tag, per user's unit) and in all (`report_total`, one limit object per
/// table shared by both rules), so a flood of refused packets costs the loop a bounded number of messages a second:
/// past the limits attempts are not counted (the count is of the attempts seen).
public enum ReportRefusals {
    /// Each app's refusals logged: at most `perApp` a second (after a burst of `burst`), and `total` a second in all.
    static let perApp = "limit rate 10/second burst 20 packets"
    static let totalName = "report_total"
    static let total = "rate 200/second burst 100 packets"
    /// The dynamic set that keeps each tag's limit (in each of the two tables): an app quiet for a minute goes.
    static let setName = "report_refused"
    static let set = "type mark; size 65535; flags dynamic,timeout; timeout 1m;"
    /// An IPv6 header and the ports: where the packet was going.
    static let snaplen = 64
    static let prefixHead = "netpermd:refused:"
    /// After the reason: the mark is a user's unit's (ReportUnits.mark), not a tag.
    static let unitSuffix = ":unit"
    /// The chain the refusing rules jump to, and the one it goes to for a user's unit's packet.
    static let chainName = "refused_log"
    static let unitChainName = "refused_unit"
    public static let jump = "jump \(chainName)"

    public static func prefix(_ r: ReportRefusal) -> String { prefixHead + r.rawValue }

    /// `refused_log` and `refused_unit`, for `reason`. A unit's packet leaves `refused_log` by its `goto` whether or
    /// not its limits let it be logged: never logged as its tag's. The packet's own mark is overwritten: it is
    /// rejected next, so nothing else reads it.
    static func chains(_ reason: ReportRefusal) -> [(name: String, rules: [String])] {
        func log(_ prefix: String) -> String { "log prefix \"\(prefix)\" group \(UsageRules.reportLogGroup) snaplen \(snaplen)" }
        let units = UnitCgroups.userLevels.sorted(by: >).map {
            "meta mark set socket cgroupv2 level \($0) map @\(ReportUnits.mapName) goto \(unitChainName)"
        }
        let tagged = "\(UsageRules.tagged) meta mark set ct mark update @\(setName) { ct mark \(perApp) } "
            + "limit name \"\(totalName)\" " + log(prefix(reason))
        let unit = "update @\(setName) { meta mark \(perApp) } limit name \"\(totalName)\" " + log(prefix(reason) + unitSuffix)
        return [(chainName, units + [tagged]), (unitChainName, [unit])]
    }

    /// The set's and the limit's declarations inside a table's block (enforcement's text).
    static var setText: String {
        "\tlimit \(totalName) {\n\t\t\(total)\n\t}\n"
            + "\tset \(setName) {\n\t\ttype mark\n\t\tsize 65535\n\t\tflags dynamic,timeout\n\t\ttimeout 1m\n\t}\n"
    }

    /// A logged refusal: its reason by the prefix, its app by the mark (a tag, or with `unitSuffix` a user's unit's
    /// `ReportUnits.mark`), where it was going by its first bytes (an IPv4 or IPv6 header, and the ports for TCP and
    /// UDP). Nil for any other prefix, an untagged mark, no unit, or a packet too short to say.
    public static func sighting(prefix: String, mark: UInt32?, outIndex: Int32?, payload p: [UInt8]) -> ReportSighting? {
        guard prefix.hasPrefix(prefixHead), let mark, let first = p.first else { return nil }
        var rest = Substring(prefix.dropFirst(prefixHead.count))
        let unit = rest.hasSuffix(unitSuffix)
        if unit { rest = rest.dropLast(unitSuffix.count) }
        guard let reason = ReportRefusal(rawValue: String(rest)), unit ? mark != 0 : ReportLabels.isTag(mark) else { return nil }
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
        return .refused(tag: unit ? 0 : mark, address: address, port: port, proto: proto, ifindex: outIndex, reason: reason,
                        unit: unit ? mark : nil)
    }
}
