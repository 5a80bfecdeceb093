// The sysfs classification input: Classifier.classify with arbitrary netlink facts, sysfs facts and [Interface]
// overrides, then the same link through the engine to LINKS. The input is lines:
//   name / ARPHRD (decimal) / rtnl kind (empty: none) / DEVTYPE (empty: none) / "phy80211" and/or "wireless"
//   then one [Interface] override a line: GLOB<TAB>Kind<TAB>Metered (a bad kind or metered: not set)
@testable import NetpermCore

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
    for l in lines.dropFirst(5).prefix(16) {
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
    require(!c.by.isEmpty && base.metered == (base.kind == .wwan), "built-in \(base)")
    switch devtype {
    case "wlan": require(base.kind == .wifi && base.by == "sysfs:devtype=wlan", "devtype wlan: \(base)")
    case "wwan": require(base.kind == .wwan && base.by == "sysfs:devtype=wwan", "devtype wwan: \(base)")
    default:
        if sysfs.hasPhy80211 || sysfs.hasWireless { require(base.kind == .wifi, "a wireless device: \(base)") }
        else if arphrd == ARPHRD.loopback { require(base.kind == .loopback, "ARPHRD loopback: \(base)") }
        else if arphrd == ARPHRD.ppp { require(base.kind == .wwan, "ARPHRD ppp: \(base)") }
    }

    // Overrides: the last matching Kind= wins; the last matching Metered= wins, else the kind's default.
    let matching = overrides.filter { $0.glob.matches(name) }
    let kind = matching.last(where: { $0.kind != nil })?.kind
    let metered = matching.last(where: { $0.metered != nil })?.metered
    if matching.isEmpty { require(c == base, "no override matches, yet \(c) != \(base)") }
    require(c.kind == (kind ?? base.kind), "kind \(c.kind), expected \(kind ?? base.kind)")
    require(c.metered == (metered ?? (kind.map { $0 == .wwan } ?? base.metered)), "metered \(c.metered): \(c)")
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
    for case let .log(_, m) in effects.list { require(!m.isEmpty, "an empty log line") }
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
    return 0
}
