// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// Issue 36, point 19: the project is LGPL-2.1-or-later, said once in LICENSE, in debian/copyright (machine-readable)
/// and in the first lines of every file of its own (fixtures that stand for the kernel's files, and the generated
/// fuzz corpus, are data, not the project's words).
final class LicenceTests: XCTestCase {
    static let identifier = "SPDX-License-Identifier: LGPL-2.1-or-later"
    /// Data, or formats with no comment syntax (deb822 control, the source format line, the changelog dpkg parses).
    static let exempt = ["Tests/NetpermCoreTests/Fixtures/", "Fuzz/corpus/", "debian/control", "debian/source/format",
                         "debian/copyright", "debian/changelog", "bench/results/.gitkeep", "LICENSE"]

    func testEveryFileSaysItsLicence() throws {
        let r = try Subprocess.run(["git", "-C", Repository.root, "ls-files"])
        XCTAssertEqual(r.status, 0, r.summary)
        let files = r.stdout.split(separator: "\n").map(String.init)
            .filter { f in !Self.exempt.contains { f.hasPrefix($0) } && !f.hasSuffix(".keep") }
        XCTAssertGreaterThan(files.count, 300)
        var missing: [String] = []
        for f in files {
            guard let text = try? String(contentsOfFile: Repository.path(f), encoding: .utf8) else { continue }
            if !text.split(separator: "\n", maxSplits: 3, omittingEmptySubsequences: false).prefix(3)
                .contains(where: { $0.contains(Self.identifier) }) { missing.append(f) }
        }
        XCTAssertEqual(missing, [], "files without `\(Self.identifier)` in their first lines")
    }

    func testTheLicenceIsShippedAndDeclared() throws {
        let licence = try Repository.read("LICENSE")
        XCTAssertTrue(licence.contains("GNU LESSER GENERAL PUBLIC LICENSE") && licence.contains("Version 2.1"))
        let copyright = try Repository.read("debian/copyright")
        XCTAssertTrue(copyright.hasPrefix("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"))
        XCTAssertTrue(copyright.contains("\nLicense: LGPL-2.1+\n"), copyright)
        XCTAssertTrue(copyright.contains("/usr/share/common-licenses/LGPL-2.1"), copyright)
    }
}
