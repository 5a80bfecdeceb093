// SPDX-License-Identifier: LGPL-2.1-or-later
@testable import NetpermCore
@testable import NetpermPolicy
import XCTest

/// mountinfo's octal escapes (lenient: a stray backslash stays) and unit names' hex escapes (strict).
final class BackslashEscapesTests: XCTestCase {
    func testMountinfoOctal() {
        XCTAssertEqual(UnitCgroups.unescapeMountinfo(#"/sys/fs/cgroup/my\040tree"#), "/sys/fs/cgroup/my tree")
        XCTAssertEqual(UnitCgroups.unescapeMountinfo(#"/a\\b\04"#), #"/a\\b\04"#, "not an escape: kept")
        XCTAssertEqual(UnitCgroups.unescapeMountinfo(#"\134x"#), #"\x"#)
    }

    func testUnitNameHex() {
        XCTAssertEqual(BackslashEscapes.decode(#"a\x2db"#, marker: UInt8(ascii: "x"), radix: 16, digits: 2, strict: true), "a-b")
        XCTAssertNil(BackslashEscapes.decode(#"a\y2db"#, marker: UInt8(ascii: "x"), radix: 16, digits: 2, strict: true))
        XCTAssertNil(BackslashEscapes.decode(#"a\x2"#, marker: UInt8(ascii: "x"), radix: 16, digits: 2, strict: true))
        XCTAssertEqual(BackslashEscapes.decode("plain", marker: UInt8(ascii: "x"), radix: 16, digits: 2, strict: true), "plain")
    }
}
