// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermPolicy
import NetpermProtocol

/// The links as the kernel, sysfs and the network sources (NetworkManager, ModemManager) have them, classified under
/// the policy's overrides: the last kernel picture (a policy reload classifies again without a dump) and each
/// link's classification with what it was computed from, so that a link's kind changes only when its name, type,
/// device, network or the overrides do, not at every carrier change.
struct LinkClassifier {
    /// The last kernel picture.
    private(set) var kernel = KernelSnapshot()
    /// Each link's classification and what it was computed from; emptied by a policy load.
    private var classifications: [Int32: (facts: ClassifiedFacts, result: Classification)] = [:]
    /// Each NetworkManager device type that disagreed with a link's kind, logged once.
    private var disagreements: Set<Disagreement> = []

    /// The policy changed: every link is classified again.
    mutating func forgetClassifications() { classifications = [:] }

    /// The network picture of `snapshot` (kept as the last one); `notice` hears, once per link and pair of kinds,
    /// that NetworkManager takes a link for another kind (the line, and the link's name).
    mutating func picture(of snapshot: KernelSnapshot, interfaces overrides: [InterfaceOverride], networks: [NetworkOverride],
                          notice: (String, String) -> Void) -> NetworkState {
        kernel = snapshot
        var seen = 0
        let network = NetworkState(snapshot: snapshot, overrides: overrides) { facts in
            seen += 1
            let sysfs = snapshot.sysfs[facts.index] ?? SysfsFacts()
            let wifi = snapshot.wifi[facts.index]
            let manager = snapshot.managed[facts.name], modem = snapshot.modems[facts.name]
            let key = ClassifiedFacts(name: facts.name, arphrd: facts.arphrd, rtnlKind: facts.rtnlKind, sysfs: sysfs,
                                      ssid: wifi?.ssid, manager: manager, modem: modem)
            if let c = classifications[facts.index], c.facts == key { return c.result }
            let result = Classifier.classify(facts, sysfs: sysfs, overrides: overrides, wifi: wifi, networks: networks,
                                             manager: manager, modem: modem)
            classifications[facts.index] = (key, result)
            if let theirs = manager?.kind, theirs != result.kind,
               disagreements.insert(Disagreement(link: facts.name, theirs: theirs, ours: result.kind)).inserted {
                notice("\(facts.name): NetworkManager takes it for \(theirs.rawValue) (device type \(manager!.deviceType)), "
                    + "netpermd for \(result.kind.rawValue) (\(result.by)); \(result.kind.rawValue) stands", facts.name)
            }
            return result
        }
        if classifications.count > seen {
            let live = Set(snapshot.links.map(\.index))
            classifications = classifications.filter { live.contains($0.key) }
        }
        return network
    }
}

/// What a link's classification depends on besides the policy's overrides.
struct ClassifiedFacts: Equatable {
    var name: String
    var arphrd: UInt32
    var rtnlKind: String?
    var sysfs: SysfsFacts
    /// The Wi-Fi network: [Network] sections apply while associated to it.
    var ssid: [UInt8]?
    var manager: NetworkManagerDevice?
    var modem: ModemRegistration?
}

/// NetworkManager's kind for a link against netpermd's.
struct Disagreement: Hashable {
    var link: String
    var theirs: LinkKind
    var ours: LinkKind
}
