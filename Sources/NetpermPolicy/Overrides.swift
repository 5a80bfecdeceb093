// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// `[Interface GLOB]` from the config: forces the kind and/or metered flag of matching links.
public struct InterfaceOverride: Equatable, Sendable {
    public var glob: Glob
    public var kind: LinkKind?
    public var metered: Bool?
    /// `Roaming=`: for a modem ModemManager does not drive (a USB stick of its own).
    public var roaming: Bool?
    public init(glob: Glob, kind: LinkKind?, metered: Bool?, roaming: Bool? = nil) {
        self.glob = glob; self.kind = kind; self.metered = metered; self.roaming = roaming
    }
}

/// `[Network SSID]` from the config: forces the kind and/or metered flag of a Wi-Fi link while it is associated
/// to a network whose SSID matches.
public struct NetworkOverride: Equatable, Sendable {
    public var glob: Glob
    public var kind: LinkKind?
    public var metered: Bool?
    public var roaming: Bool?
    public init(glob: Glob, kind: LinkKind?, metered: Bool?, roaming: Bool? = nil) {
        self.glob = glob; self.kind = kind; self.metered = metered; self.roaming = roaming
    }

    /// An SSID is bytes; a glob is text. Bytes that are not UTF-8 become U+FFFD, which only a wildcard matches.
    public func matches(ssid: [UInt8]) -> Bool { glob.matches(String(decoding: ssid, as: UTF8.self)) }
}
