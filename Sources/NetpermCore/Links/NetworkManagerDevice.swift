// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol

/// What NetworkManager says of one of its devices over the system bus (docs/CLASSIFICATION.md, "NetworkManager"):
/// whether it is metered, what kind of device it takes it for, and the connection active on it. Read by the edge;
/// the classifier decides what it is worth.
public struct NetworkManagerDevice: Equatable, Hashable, Sendable {
    /// `Device.Metered` (NMMetered): what the person set on the connection (`connection.metered`), else
    /// NetworkManager's own guess (a phone hotspot's DHCP option, a modem).
    public enum Metered: String, Sendable, CaseIterable {
        case unknown, yes, no
        case guessYes = "guess-yes"
        case guessNo = "guess-no"

        /// NM_METERED_UNKNOWN 0, YES 1, NO 2, GUESS_YES 3, GUESS_NO 4; anything else is unknown.
        public init(dbus value: UInt32) {
            switch value {
            case 1: self = .yes
            case 2: self = .no
            case 3: self = .guessYes
            case 4: self = .guessNo
            default: self = .unknown
            }
        }

        /// Metered or not; nil when NetworkManager does not know (the built-in guesses decide).
        public var value: Bool? {
            switch self {
            case .yes, .guessYes: return true
            case .no, .guessNo: return false
            case .unknown: return nil
            }
        }
    }

    public var metered: Metered
    /// `Device.DeviceType` (NMDeviceType).
    public var deviceType: UInt32
    /// The active connection's `Id` ("Home", "Pixel hotspot") and `Type` ("802-11-wireless", "gsm"); nil when
    /// none is active on the device.
    public var connectionID: String?
    public var connectionType: String?

    public init(metered: Metered, deviceType: UInt32, connectionID: String? = nil, connectionType: String? = nil) {
        self.metered = metered; self.deviceType = deviceType
        self.connectionID = connectionID; self.connectionType = connectionType
    }

    /// The device type as the kind it would be; nil for types that say nothing of the kind (bridges, bonds,
    /// tunnels, unknown).
    public var kind: LinkKind? { Self.kind(deviceType: deviceType) }

    /// NMDeviceType: ETHERNET 1, WIFI 2, BT 5 (a phone's tethering: wwan, as the built-in rules take it),
    /// MODEM 8, WIFI_P2P 30; the rest say nothing of the kind.
    public static func kind(deviceType: UInt32) -> LinkKind? {
        switch deviceType {
        case 1: return .ethernet
        case 2, 30: return .wifi
        case 5, 8: return .wwan
        default: return nil
        }
    }
}
