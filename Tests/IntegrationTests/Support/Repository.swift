// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Paths in the source tree, from this file's own place in it (Tests/IntegrationTests/Support/).
enum Repository {
    static var root: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    static func path(_ relative: String) -> String { root + "/" + relative }

    static func read(_ relative: String) throws -> String {
        try String(contentsOfFile: path(relative), encoding: .utf8)
    }

    /// The man pages under man/, by file name; the section is the last extension.
    static let manPages = ["netpermctl.1", "netpermd.conf.5", "netpermd.8", "netpermd-settings.1"]

    /// Copies the pages into `dir`/manN/, a tree `man` searches when MANPATH names `dir`.
    static func makeManTree(in dir: String) throws {
        for page in manPages {
            let section = String(page.split(separator: ".").last!)
            let sub = "\(dir)/man\(section)"
            try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: path("man/" + page), toPath: "\(sub)/\(page)")
        }
    }

    /// A tool the tests need, resolved through PATH; throws with the package to install when it is missing.
    static func requireTool(_ tool: String, package: String) throws -> String {
        let path = Subprocess.resolve(tool)
        guard path.hasPrefix("/") else {
            throw HarnessError("\(tool) is not installed: apt-get install \(package) (make test-deps does)")
        }
        return path
    }
}

extension XCTestCase {
    /// A fresh directory under /tmp, removed when the test ends.
    func makeTempDir() throws -> String {
        var template = Array("/tmp/npt-XXXXXX".utf8CString)
        guard let p = mkdtemp(&template) else { throw HarnessError("mkdtemp: \(String(cString: strerror(errno)))") }
        let dir = String(cString: p)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: dir) }
        return dir
    }
}
