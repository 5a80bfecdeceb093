// SPDX-License-Identifier: LGPL-2.1-or-later

/// A user's own app's connections in the report (docs/PRIVACY.md): users' units are not tagged (their tag is their
/// uid's app's), so the counting table's `user_output` hook writes the unit's cgroup id into the new connection's
/// labels, which conntrack's `NEW` event carries, and the engine finds the unit's `UserApp` by that id (the usage
/// table's `unitOwners`). nft cannot copy a cgroup into labels: one set per bit of the id (`report_bit_N`: the
/// units' cgroups whose id has bit N), and a rule per bit in use setting that label. A socket's unit is its
/// deepest level that is one (`goto`: one level's bits only, never two units' ids mixed).
enum ReportUnits {
    /// Label bits `idBase` to `idBase + 63`: the cgroup id; `present`: a unit's id is there.
    static let idBase = 48
    static let present = 119
    static let bits = 64

    static func setName(_ bit: Int) -> String { "report_bit_\(bit)" }
    /// The map from a unit's cgroup to its `mark`, in both tables: what a refused packet is logged with
    /// (ReportRefusals).
    static let mapName = "report_units"

    /// A unit's cgroup id as a packet's mark: its low 32 bits, the kernfs inode number, which no two cgroups alive
    /// share (the high ones count the wraps of its allocator) and the daemon holds each named unit's open. nft
    /// cannot copy the 64-bit id into a 32-bit mark, so the maps give this instead.
    public static func mark(_ id: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: id) }

    /// The unit whose `mark` is `mark` among `ids`; nil for none, or two (never alive at once).
    static func unit<C: Collection>(mark: UInt32, among ids: C) -> UInt64? where C.Element == UInt64 {
        var found: UInt64?
        for id in ids where Self.mark(id) == mark {
            guard found == nil else { return nil }
            found = id
        }
        return found
    }
    static func levelChain(_ level: Int) -> String { "report_level_\(level)" }

    /// The cgroup id the labels hold (CTA_LABELS, as `ReportLabels.link` reads them), nil when none.
    static func unit(_ labels: [UInt8]) -> UInt64? {
        func bit(_ n: Int) -> Bool { n / 8 < labels.count && labels[n / 8] & (1 << UInt8(n % 8)) != 0 }
        guard bit(present) else { return nil }
        let id = (0..<bits).reduce(UInt64(0)) { $0 | (bit(idBase + $1) ? 1 << UInt64($1) : 0) }
        return id == 0 ? nil : id
    }

    /// The sets and the marks' map, always declared (the table's sets are made at a whole load only); their
    /// elements while `on`.
    static func maps(_ units: [Ruleset.Tagging.UserUnit], on: Bool) -> [UsageRules.Map] {
        (0..<bits).map { b in
            UsageRules.Map(name: setName(b), type: "cgroupsv2",
                           elements: on ? units.filter { $0.id & (1 << UInt64(b)) != 0 }.map(\.key.text) : [])
        } + [UsageRules.Map(name: mapName, type: "cgroupsv2 : mark",
                            elements: on ? units.map { $0.key.text + " : " + ConnectionTags.text(mark($0.id)) } : [])]
    }

    /// `report_unit`, which `user_output` jumps to for a new connection, and a chain per level; rules while `on`.
    static func chains(_ units: [Ruleset.Tagging.UserUnit], on: Bool) -> [UsageRules.Chain] {
        let levels = on ? Set(units.map(\.level)).sorted(by: >) : []
        var chains = [UsageRules.Chain(name: "report_unit", hook: nil, rules: levels.map {
            "socket cgroupv2 level \($0) @user_units goto \(levelChain($0))"
        })]
        for level in UnitCgroups.userLevels {
            let used = (0..<bits).filter { b in units.contains { $0.level == level && $0.id & (1 << UInt64(b)) != 0 } }
            chains.append(UsageRules.Chain(name: levelChain(level), hook: nil, rules: levels.contains(level)
                ? ["ct label set \(present)"] + used.map { "socket cgroupv2 level \(level) @\(setName($0)) ct label set \(idBase + $0)" }
                : []))
        }
        return chains
    }

    /// In `user_output`, first: a new connection of a socket in a user's unit.
    static func rule(_ units: [Ruleset.Tagging.UserUnit], on: Bool) -> [String] {
        on && !units.isEmpty ? ["ct state new jump report_unit"] : []
    }
}
