// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A person's language for a test: the locale built by localedef into a directory of the test's own (LOCPATH: the
/// host's locales are not touched) and the project's catalogues compiled from po/ into another, both readable by
/// the test's users. The environment to run a program with comes back.
enum Languages {
    /// `lang`: zh_CN or de; `catalogues`: each gettext domain with its .po directory under the repository, and the
    /// variable that points a program at them.
    static func environment(_ test: IntegrationTestCase, _ lang: String,
                            catalogues: [(domain: String, po: String, variable: String)]) throws -> [String] {
        let locales = try test.makeTempDir()
        let source = lang == "de" ? "de_DE" : lang
        let def = try Subprocess.run(["localedef", "-i", source, "-f", "UTF-8", locales + "/\(source).UTF-8"], timeout: 60)
        XCTAssertEqual(def.status, 0, def.summary)
        var env = ["LANG=\(source).UTF-8", "LOCPATH=\(locales)"]
        for c in catalogues {
            let dir = try test.makeTempDir()
            for l in ["de", "zh_CN"] {
                try FileManager.default.createDirectory(atPath: dir + "/\(l)/LC_MESSAGES", withIntermediateDirectories: true)
                let mo = try Subprocess.run(["msgfmt", "--check", "-o", dir + "/\(l)/LC_MESSAGES/\(c.domain).mo",
                                             Repository.path("\(c.po)/\(l).po")])
                XCTAssertEqual(mo.status, 0, mo.summary)
            }
            env.append("\(c.variable)=\(dir)")
            _ = chmod(dir, 0o755)
        }
        for d in [locales] { _ = chmod(d, 0o755) }
        _ = try Subprocess.run(["chmod", "-R", "a+rX"] + env.compactMap { $0.split(separator: "=", maxSplits: 1).last.map(String.init) }
            .filter { $0.hasPrefix("/") })
        return env
    }
}
