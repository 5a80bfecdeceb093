// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermProtocol
@testable import NetpermSystemd
import XCTest

/// The one rule by which a socket reply becomes D-Bus values (docs/DBUS.md, "Types").
final class BusJSONTests: XCTestCase {
    func testSignatures() {
        XCTAssertEqual(BusJSON.signature(of: "x"), "s")
        XCTAssertEqual(BusJSON.signature(of: true), "b")
        XCTAssertEqual(BusJSON.signature(of: 3), "x")
        XCTAssertEqual(BusJSON.signature(of: .object([("a", 1)])), "a{sv}")
        XCTAssertEqual(BusJSON.signature(of: .array(["wwan", "metered"])), "as")
        XCTAssertEqual(BusJSON.signature(of: .array([1, 2])), "ax")
        XCTAssertEqual(BusJSON.signature(of: .array([.object([]), .object([("a", 1)])])), "aa{sv}")
        XCTAssertEqual(BusJSON.signature(of: .array([])), "as", "an empty array")
        XCTAssertEqual(BusJSON.signature(of: .array(["a", .null, "b"])), "as", "nulls left out")
        XCTAssertEqual(BusJSON.signature(of: .array(["a", 1])), "av", "mixed")
        XCTAssertEqual(BusJSON.signature(of: .array([.array(["a"])])), "av", "arrays of arrays")
    }
}
