// SPDX-License-Identifier: LGPL-2.1-or-later

/// NetworkManager's devices as netpermd reads them (docs/CLASSIFICATION.md, "NetworkManager"): per kernel link
/// name, `Device.Metered`, `Device.DeviceType` and the active connection's `Id` and `Type`.
public struct ManagedDevice: Equatable, Sendable {
    public var metered: UInt32
    public var deviceType: UInt32
    public var connectionID: String?
    public var connectionType: String?
}

public enum NetworkManagerReader {
    public static let name = "org.freedesktop.NetworkManager"
    static let path = "/org/freedesktop/NetworkManager"
    static let device = "org.freedesktop.NetworkManager.Device"
    static let active = "org.freedesktop.NetworkManager.Connection.Active"
    /// The properties whose change is read again; NetworkManager signals many more (statistics, access points'
    /// strength, IP configurations) that say nothing of these.
    static let watched: Set<String> = ["Metered", "DeviceType", "Interface", "IpInterface", "ActiveConnection",
                                       "Devices", "Id", "Type"]

    /// Follows NetworkManager on `bus`: an empty picture where it does not run.
    public static func follow(bus: SystemBus, loop: SDEventLoop) -> FollowedService<[String: ManagedDevice]> {
        let signals = FollowedService<[String: ManagedDevice]>.signals(
            of: name, [(name, "DeviceAdded"), (name, "DeviceRemoved")], properties: watched, on: [device, active, name])
        return FollowedService(name: name, bus: bus, loop: loop, empty: [:], matches: signals.matches,
                               relevant: signals.relevant, read: read)
    }

    static func read(_ bus: SystemBus, _ done: @escaping (Result<[String: ManagedDevice], BusCallError>) -> Void) {
        bus.call(name, path, name, "GetDevices") { result in
            switch result {
            case let .failure(e): done(.failure(e))
            case let .success(reply):
                gather(reply.strings("o") ?? [], { p, finish in bus.properties(name, p, device, finish) }) { devices in
                    var failure: BusCallError?
                    var found: [(names: [String], device: ManagedDevice, active: String?)] = []
                    for d in devices {
                        switch d {
                        case let .failure(e) where e.gone: continue
                        case let .failure(e): failure = failure ?? e
                        case let .success(p):
                            // A modem's Interface is its control port (cdc-wdm0, ttyUSB2): its link is IpInterface.
                            let names = [p["IpInterface"]?.string, p["Interface"]?.string].compactMap { $0 }.filter { !$0.isEmpty }
                            let active = p["ActiveConnection"]?.string.flatMap { $0 == "/" ? nil : $0 }
                            found.append((names, ManagedDevice(metered: p["Metered"]?.uint32 ?? 0,
                                                               deviceType: p["DeviceType"]?.uint32 ?? 0), active))
                        }
                    }
                    // A device gone between the two calls is skipped (its DeviceRemoved reads again); any other
                    // failure (a time-out, a refusal tried in vain) fails the reading, whose last picture then
                    // stands: a device not read is never taken for one gone.
                    if let failure { return done(.failure(failure)) }
                    let paths = Array(Set(found.compactMap(\.active))).sorted()
                    gather(paths, { p, finish in bus.properties(name, p, active, finish) }) { connections in
                        var byPath: [String: [String: BusValue]] = [:]
                        for (p, c) in zip(paths, connections) {
                            switch c {
                            case let .success(props): byPath[p] = props
                            case let .failure(e) where e.gone: continue
                            case let .failure(e): return done(.failure(e))
                            }
                        }
                        var out: [String: ManagedDevice] = [:]
                        for f in found {
                            var d = f.device
                            if let a = f.active, let c = byPath[a] {
                                d.connectionID = c["Id"]?.string
                                d.connectionType = c["Type"]?.string
                            }
                            for n in f.names where out[n] == nil { out[n] = d }
                        }
                        done(.success(out))
                    }
                }
            }
        }
    }
}
