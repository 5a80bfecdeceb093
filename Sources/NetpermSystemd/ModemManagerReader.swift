// SPDX-License-Identifier: LGPL-2.1-or-later

/// ModemManager's modems as netpermd reads them (docs/CLASSIFICATION.md, "ModemManager"): per kernel link name
/// (each bearer's `Interface`, and the modem's network ports), the modem's `Modem3gpp.RegistrationState`.
public enum ModemManagerReader {
    public static let name = "org.freedesktop.ModemManager1"
    static let path = "/org/freedesktop/ModemManager1"
    static let modem = "org.freedesktop.ModemManager1.Modem"
    static let threeGPP = "org.freedesktop.ModemManager1.Modem.Modem3gpp"
    static let bearer = "org.freedesktop.ModemManager1.Bearer"
    /// MM_MODEM_PORT_TYPE_NET: a port that is a network interface.
    static let netPort: UInt32 = 2
    static let watched: Set<String> = ["RegistrationState", "Bearers", "Ports", "Interface"]

    /// Follows ModemManager on `bus`: an empty picture where it does not run.
    public static func follow(bus: SystemBus, loop: SDEventLoop) -> FollowedService<[String: UInt32]> {
        let objects = "org.freedesktop.DBus.ObjectManager"
        let signals = FollowedService<[String: UInt32]>.signals(
            of: name, [(objects, "InterfacesAdded"), (objects, "InterfacesRemoved")], properties: watched,
            on: [modem, threeGPP, bearer])
        return FollowedService(name: name, bus: bus, loop: loop, empty: [:], matches: signals.matches,
                               relevant: signals.relevant, read: read)
    }

    static func read(_ bus: SystemBus, _ done: @escaping (Result<[String: UInt32], BusCallError>) -> Void) {
        bus.call(name, path, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects") { result in
            switch result {
            case let .failure(e): done(.failure(e))
            case let .success(reply):
                guard let objects = reply.managedObjects() else {
                    return done(.failure(BusCallError(name: "BadReply", errno: 74)))
                }
                var modems: [(state: UInt32, bearers: [String], ports: [String])] = []
                for path in objects.keys.sorted() {
                    guard let m = objects[path]?[modem] else { continue }
                    let state = objects[path]?[threeGPP]?["RegistrationState"]?.uint32 ?? 4
                    let ports = m["Ports"]?.namedNumbers.filter { $0.number == netPort }.map(\.name) ?? []
                    modems.append((state, m["Bearers"]?.objectPaths ?? [], ports))
                }
                let bearers = modems.flatMap(\.bearers)
                gather(bearers, { p, finish in bus.properties(name, p, bearer, finish) }) { replies in
                    var interface: [String: String] = [:]
                    for (p, r) in zip(bearers, replies) {
                        switch r {
                        case let .success(props):
                            if let i = props["Interface"]?.string, !i.isEmpty { interface[p] = i }
                        // A bearer gone since the listing is skipped (InterfacesRemoved reads again); any other
                        // failure fails the reading: its modem's links are never taken for home.
                        case let .failure(e) where e.gone: continue
                        case let .failure(e): return done(.failure(e))
                        }
                    }
                    var out: [String: UInt32] = [:]
                    for m in modems {
                        for n in m.bearers.compactMap({ interface[$0] }) + m.ports where out[n] == nil { out[n] = m.state }
                    }
                    done(.success(out))
                }
            }
        }
    }
}
