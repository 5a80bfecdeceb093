// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermSystemd
import XCTest

/// What a failed call says of the service it named (polkit's absence, docs/DBUS.md): not on the bus, or the bus
/// could not start it (its unit masked: sd-bus's errno for that, ERFKILL, must not be what a caller reads).
final class BusCallErrorTests: XCTestCase {
    func testAServiceTheBusCannotStartIsNotRunning() {
        for name in ["org.freedesktop.systemd1.UnitMasked", "org.freedesktop.systemd1.NoSuchUnit",
                     "org.freedesktop.DBus.Error.Spawn.ChildExited", "org.freedesktop.DBus.Error.Spawn.ServiceNotFound"] {
            XCTAssertTrue(BusCallError(name: name, errno: 0).activationFailed, name)
        }
        for name in ["org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner"] {
            XCTAssertTrue(BusCallError(name: name, errno: 0).serviceAbsent, name)
            XCTAssertFalse(BusCallError(name: name, errno: 0).activationFailed, name)
        }
        for name in ["org.freedesktop.DBus.Error.Timeout", "org.freedesktop.DBus.Error.AccessDenied", "Disconnected"] {
            XCTAssertFalse(BusCallError(name: name, errno: 0).activationFailed, name)
        }
    }
}
