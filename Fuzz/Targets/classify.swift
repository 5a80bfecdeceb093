// SPDX-License-Identifier: LGPL-2.1-or-later
// The sysfs classification input: Classifier.classify with arbitrary netlink facts, sysfs facts and [Interface]
// overrides, then the same link through the engine to LINKS. The input is lines:
//   name / ARPHRD (decimal) / rtnl kind (empty: none) / DEVTYPE (empty: none) / "phy80211" and/or "wireless"
//   then one [Interface] override a line: GLOB<TAB>Kind<TAB>Metered (a bad kind or metered: not set)
// and, for the stacking pass, a picture of more links, in lines starting with:
//   +INDEX NAME ARPHRD KIND LOWER MASTER DEVTYPE ('-' for none)   @TUNNEL EGRESS (where a tunnel's remote goes)
//   =INDEX METRIC (a default route)                                ^INDEX (a host route through the link)
@testable import NetpermCore
@testable import NetpermPolicy
@testable import NetpermProtocol

func field(_ lines: [[UInt8]], _ i: Int) -> String? {
    i < lines.count ? String(decoding: lines[i], as: UTF8.self) : nil
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let lines = split(bytes(data, size), on: 0x0A)
    let name = field(lines, 0) ?? ""
    let arphrd = UInt32(clamping: number(lines.count > 1 ? lines[1][...] : [], limit: Int(UInt32.max)) ?? 1)
    let rtnlKind = field(lines, 2).flatMap { $0.isEmpty ? nil : $0 }
    let devtype = field(lines, 3).flatMap { $0.isEmpty ? nil : $0 }
    let flags = field(lines, 4) ?? ""
    let sysfs = SysfsFacts(devtype: devtype, hasPhy80211: flags.contains("phy80211"), hasWireless: flags.contains("wireless"))
    var overrides: [InterfaceOverride] = []
    for l in lines.dropFirst(5).prefix(16) where !"+@=^".utf8.contains(l.first ?? 0) {
        let f = l.split(separator: 0x09, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard let glob = try? Glob(f[0]) else { continue }
        overrides.append(InterfaceOverride(glob: glob, kind: f.count > 1 ? LinkKind(rawValue: f[1]) : nil,
                                           metered: f.count > 2 ? Ini.parseBool(f[2]) : nil))
    }
    let facts = LinkFacts(index: 7, name: name, arphrd: arphrd, rtnlKind: rtnlKind, adminUp: true, carrier: true,
                          operstate: "up")
    let c = Classifier.classify(facts, sysfs: sysfs, overrides: overrides)
    let base = Classifier.builtIn(facts, sysfs: sysfs)

    // The built-in rules: sysfs first, then the link type, then the rtnl kind, the name last.
    require(!c.by.isEmpty && !base.by.isEmpty, "built-in \(base)")
    let modemName = ["rmnet", "ccmni", "wwan"].contains { name.hasPrefix($0) }
    switch devtype {
    case "wlan": require(base.kind == .wifi && base.by == "sysfs:devtype=wlan", "devtype wlan: \(base)")
    case "wwan": require(base.kind == .wwan && base.by == "sysfs:devtype=wwan", "devtype wwan: \(base)")
    default:
        if sysfs.hasPhy80211 || sysfs.hasWireless { require(base.kind == .wifi, "a wireless device: \(base)") }
        else if devtype == "bluetooth" { require(base.kind == .wwan && base.tethering, "bluetooth PAN: \(base)") }
        else if modemName && !(rtnlKind.map(Classifier.virtualKinds.contains) ?? false) {
            require(base.kind == .wwan, "a modem's name: \(base)")
        }
        else if arphrd == ARPHRD.loopback { require(base.kind == .loopback, "ARPHRD loopback: \(base)") }
        else if arphrd == ARPHRD.ppp { require(base.kind == .wwan, "ARPHRD ppp, channel unknown: \(base)") }
    }

    // Overrides: the last matching Kind= wins (and drops tethering); the last matching Metered= wins, else the
    // metered sources in order: tethering, the kind (wwan), DHCP, the default.
    let matching = overrides.filter { $0.glob.matches(name) }
    let kind = matching.last(where: { $0.kind != nil })?.kind
    let metered = matching.last(where: { $0.metered != nil })?.metered
    let finalKind = kind ?? base.kind
    let expected: (Bool, MeteredSource) =
        if let metered { (metered, .config) }
        else if kind == nil && base.tethering { (true, .tethering) }
        else if finalKind == .wwan { (true, .kind) }
        else if sysfs.dhcpAndroidMetered { (true, .dhcp) }
        else { (false, .default) }
    if matching.isEmpty { require(c.kind == base.kind && c.by == base.by, "no override matches, yet \(c) != \(base)") }
    require(c.kind == finalKind, "kind \(c.kind), expected \(finalKind)")
    require(c.metered == expected.0 && c.meteredBy == expected.1, "metered \(c.metered) by \(c.meteredBy): \(c)")
    if let kind { require(c.by.hasPrefix("config:[Interface ") && kind == c.kind, "by \(c.by)") } else { require(c.by == base.by, "by \(c.by)") }

    // The link through the engine: LINKS lists it under its own name, as classified, in valid JSON.
    var policy = ""
    for o in overrides where !o.glob.pattern.contains("\n") && !o.glob.pattern.contains("]") {
        policy += "[Interface \(o.glob.pattern)]\n" + (o.kind.map { "Kind=\($0.rawValue)\n" } ?? "")
            + (o.metered.map { "Metered=\($0 ? "yes" : "no")\n" } ?? "") + (o.kind == nil && o.metered == nil ? "Metered=no\n" : "")
    }
    let engine = Engine()
    let effects = Effects()
    var snap = KernelSnapshot(links: [LinkFacts(index: 1, name: "lo", arphrd: ARPHRD.loopback, rtnlKind: nil, adminUp: true,
                                                carrier: true, operstate: "unknown"), facts],
                              defaultRoutes: [DefaultRouteFacts(index: 7, family: .ipv4, metric: 100)],
                              egress: [.ipv4: .link(7)], sysfs: [7: sysfs])
    snap.addresses = [AddressFacts(index: 7, family: .ipv4, text: "192.0.2.7/24")]
    engine.handle(.policy(Config.parse(files: [(path: "p", text: policy)])), into: effects)
    engine.handle(.kernel(snap), into: effects)
    engine.handle(.started, into: effects)
    for case let .log(_, m, _) in effects.list { require(!m.isEmpty, "an empty log line") }
    effects.reset()
    engine.handle(.opened(1, PeerIdentity(pid: 1, uid: 0, gids: [0], executable: "/usr/bin/x", unit: nil)), into: effects)
    engine.handle(.line(1, Array("LINKS".utf8)), into: effects)
    guard case let .reply(1, r)? = effects.list.last else { require(false, "no reply to LINKS: \(effects.list)"); return 0 }
    let line = Array(effects[r])
    require(line.last == 0x0A && !line.dropLast().contains(0x0A), "LINKS is not one line: \(show(line))")
    switch StrictJSON.parseObject(Array(line.dropLast())) {
    case let .failure(f): require(false, "LINKS is not JSON (\(f.message) at \(f.offset)): \(show(line))")
    case let .success(v):
        let links = v["links"]?.array ?? []
        require(links.count == 2, "LINKS has \(links.count) links: \(show(line))")
        let l = links.last ?? .null
        require(l["name"]?.string == name, "the name came back as \(l["name"]?.string?.debugDescription ?? "nil"), "
                + "not \(name.debugDescription)")
        // The policy's own parse of the same overrides agrees with the classifier's.
        if engine.state.policyError == nil {
            let viaPolicy = Classifier.classify(facts, sysfs: sysfs, overrides: engine.state.config.interfaces)
            require(l["kind"]?.string == viaPolicy.kind.rawValue && l["metered"]?.bool == viaPolicy.metered,
                    "LINKS says \(l["kind"]?.string ?? "?") metered \(l["metered"]?.bool.map { "\($0)" } ?? "?"), classify \(viaPolicy)")
        }
    }
    checkStacking(lines.filter { "+@=^".utf8.contains($0.first ?? 0) }.prefix(24), overrides: overrides)
    return 0
}

/// The stacking pass over a picture of several links: it ends, whatever the graph (the kernel allows no cycle,
/// but a picture taken mid-change may show one); every `over` names a link of the picture; a link that is not
/// stacked keeps its own classification; and, when the graph has no cycle, the kernel's order of the links does
/// not matter.
func checkStacking(_ lines: ArraySlice<[UInt8]>, overrides: [InterfaceOverride]) {
    guard !lines.isEmpty else { return }
    var snap = KernelSnapshot()
    var seen: Set<Int32> = []
    for l in lines {
        let w = String(decoding: l.dropFirst(), as: UTF8.self).split(separator: " ").map(String.init)
        func int(_ i: Int) -> Int32? { i < w.count ? Int32(w[i]).map { max(1, min(64, $0)) } : nil }
        switch l.first {
        case UInt8(ascii: "+"):
            guard let index = int(0), seen.insert(index).inserted else { continue }
            let name = w.count > 1 ? w[1] : "l\(index)"
            let kind = w.count > 3 && w[3] != "-" ? w[3] : nil
            snap.links.append(LinkFacts(index: index, name: name, arphrd: w.count > 2 ? UInt32(w[2]) ?? 1 : 1, rtnlKind: kind,
                                        adminUp: true, carrier: true, operstate: "up", lowerIndex: int(4), masterIndex: int(5),
                                        tunnelRemote: kind.map(Stacking.tunnelKinds.contains) == true && index % 2 == 0 ? [192, 0, 2, 1] : nil))
            if w.count > 6, w[6] != "-" { snap.sysfs[index] = SysfsFacts(devtype: w[6]) }
        case UInt8(ascii: "@"): if let t = int(0), let e = int(1) { snap.endpointRoutes[t] = .link(e) }
        case UInt8(ascii: "="): if let i = int(0) { snap.defaultRoutes.append(DefaultRouteFacts(index: i, family: .ipv4, metric: UInt32(int(1) ?? 100))) }
        default: if let i = int(0) { snap.hostRoutes.append(HostRouteFacts(index: i, destination: "192.0.2.\(i)")) }
        }
    }
    func picture(_ s: KernelSnapshot) -> NetworkState {
        NetworkState(snapshot: s, overrides: overrides) { f in
            Classifier.classify(f, sysfs: s.sysfs[f.index] ?? SysfsFacts(), overrides: overrides)
        }
    }
    let state = picture(snap)
    let names = Set(snap.links.map(\.name))
    require(state.links.count == snap.links.count, "\(snap.links.count) links became \(state.links.count)")
    for l in state.links {
        require(!l.classifiedBy.isEmpty, "\(l.name): no classified_by")
        if let over = l.over { require(names.contains(over), "\(l.name) over \(over), which is not in the picture") }
        if l.over == nil, let f = snap.links.first(where: { $0.index == l.index }) {
            let own = Classifier.classify(f, sysfs: snap.sysfs[f.index] ?? SysfsFacts(), overrides: overrides)
            require(l.kind == own.kind && l.classifiedBy == own.by, "\(l.name) is over nothing, yet \(l.kind) by \(l.classifiedBy), not \(own)")
        }
    }
    // Order: only when nothing reaches itself by lower, master or endpoint links.
    var edges: [Int32: [Int32]] = [:]
    for f in snap.links {
        if let lo = f.lowerIndex { edges[f.index, default: []].append(lo) }
        if let m = f.masterIndex { edges[m, default: []].append(f.index) }
        if case let .link(e)? = snap.endpointRoutes[f.index] { edges[f.index, default: []].append(e) }
    }
    func cyclic() -> Bool {
        var state: [Int32: Int] = [:]
        func visit(_ n: Int32) -> Bool {
            if state[n] == 1 { return true }
            if state[n] == 2 { return false }
            state[n] = 1
            for m in edges[n] ?? [] where visit(m) { return true }
            state[n] = 2
            return false
        }
        return edges.keys.contains { visit($0) }
    }
    let hasTunnel = snap.links.contains(where: Stacking.isTunnel)
    if !cyclic() && !hasTunnel {
        var reversed = snap
        reversed.links.reverse()
        let other = picture(reversed)
        let a = state.links.sorted { $0.index < $1.index }, b = other.links.sorted { $0.index < $1.index }
        require(a == b, "the links' order changed the result:\n\(a.map { "\($0.name) \($0.kind) \($0.classifiedBy)" })\n"
            + "\(b.map { "\($0.name) \($0.kind) \($0.classifiedBy)" })")
    }
}
