// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import Glibc
@testable import NetpermIO
import XCTest

/// Files set aside are kept, whatever else is set aside beside them (docs/SECURITY.md: "never lost").
final class AtomicFileTests: XCTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("np-atomic-\(getpid())-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: dir)
    }

    private func read(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    /// Two corrupt files set aside within the same second: the second used to be renamed over the first
    /// (`decisions.conf.corrupt-SECONDS` both times), and the first was lost.
    func testTwoFilesSetAsideInOneSecondAreBothKept() throws {
        let path = dir + "/decisions.conf"
        try "first\n".write(toFile: path, atomically: false, encoding: .utf8)
        let first = try AtomicFile.moveAside(path)
        try "second\n".write(toFile: path, atomically: false, encoding: .utf8)
        // Within the same second as the first, whatever the clock did meanwhile: a file already set aside at the
        // name this one would take (the seconds of now and the next two).
        let now = Clock.realtimeSeconds()
        for s in now...(now + 2) where !FileManager.default.fileExists(atPath: "\(path).corrupt-\(s)") {
            try "earlier \(s)\n".write(toFile: "\(path).corrupt-\(s)", atomically: false, encoding: .utf8)
        }
        let second = try AtomicFile.moveAside(path)
        XCTAssertNotEqual(first, second)
        XCTAssertEqual(read(first), "first\n", "the first file set aside is still there")
        XCTAssertEqual(read(second), "second\n")
        for s in now...(now + 2) where "\(path).corrupt-\(s)" != first {
            XCTAssertEqual(read("\(path).corrupt-\(s)"), "earlier \(s)\n", "nothing was replaced")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        XCTAssertTrue(second.hasPrefix("\(path).corrupt-"), second)
    }

    /// Many in the same second: each gets a name of its own.
    func testManyInOneSecondEachGetANameOfTheirOwn() throws {
        let path = dir + "/decisions.conf"
        var asides: [String] = []
        for i in 0..<5 {
            try "copy \(i)\n".write(toFile: path, atomically: false, encoding: .utf8)
            asides.append(try AtomicFile.moveAside(path, seconds: 1_700_000_000))
        }
        XCTAssertEqual(asides, ["", ".1", ".2", ".3", ".4"].map { "\(path).corrupt-1700000000" + $0 })
        for (i, a) in asides.enumerated() { XCTAssertEqual(read(a), "copy \(i)\n") }
    }
}
