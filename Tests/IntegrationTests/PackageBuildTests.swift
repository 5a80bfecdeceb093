// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest

/// Issue 36, 18: a source package Debian could build. debian/changelog is in git (`dpkg-buildpackage -b` from a clone
/// failed: the Makefile wrote it), a package build installs nothing (the build ran apt-get for what Build-Depends do
/// not name), and the programs carry no RUNPATH and are bound at start (RUNPATH $ORIGIN, no BIND_NOW), the daemon
/// in /usr/sbin.
final class PackageBuildTests: IntegrationTestCase {
    func testTheChangelogIsInGitAndNamesTheSourcesVersion() throws {
        let tracked = try Subprocess.check(["git", "-C", Repository.root, "ls-files", "debian/changelog"]).stdout
        XCTAssertEqual(tracked, "debian/changelog\n", "a clone has it")
        let version = try Subprocess.check(["dpkg-parsechangelog", "-l", Repository.path("debian/changelog"), "-S", "Version"])
        let sources = try Repository.read("Sources/NetpermProtocol/Version.swift")
        XCTAssertTrue(sources.contains("static let version = \"\(version.stdout.trimmingCharacters(in: .newlines))\""),
                      "one version: \(version.stdout)")
    }

    /// The Makefile's installing of missing packages, with a dpkg-query that says nothing is installed and an
    /// apt-get that records being called: it runs for `make deps`, never with NO_APT=1 (what debian/rules passes).
    func testAPackageBuildInstallsNothing() throws {
        let fake = try makeTempDir()
        let calls = fake + "/apt-get.calls"
        for (tool, body) in [("dpkg-query", "exit 1"), ("apt-get", "echo \"$@\" >> \(calls)")] {
            try "#!/bin/sh\n# SPDX-License-Identifier: LGPL-2.1-or-later\n\(body)\n"
                .write(toFile: fake + "/" + tool, atomically: true, encoding: .utf8)
            chmod(fake + "/" + tool, 0o755)
        }
        let path = fake + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let quiet = try Subprocess.run(["env", "PATH=" + path, "make", "-s", "-C", Repository.root, "deps", "gio-deps",
                                        "NO_APT=1"])
        XCTAssertEqual(quiet.status, 0, quiet.summary)
        XCTAssertFalse(FileManager.default.fileExists(atPath: calls), "NO_APT=1: apt-get never runs")
        _ = try Subprocess.run(["env", "PATH=" + path, "make", "-s", "-C", Repository.root, "deps"])
        XCTAssertTrue(((try? String(contentsOfFile: calls, encoding: .utf8)) ?? "").contains("install"),
                      "without it, make deps installs what is missing (the fake was called)")
        let rules = try Repository.read("debian/rules")
        XCTAssertTrue(rules.contains("$(MAKE) release NO_APT=1"), rules)
        XCTAssertTrue(rules.contains("$(MAKE) gio-module NO_APT=1"), rules)
    }

    func testTheProgramsHaveNoRunpathAndAreBoundAtStart() throws {
        let dir = try makeTempDir()
        let debs = PackageTests.debDir
        let deb = try XCTUnwrap((try FileManager.default.contentsOfDirectory(atPath: debs))
            .first { $0.hasPrefix("netpermd_") && $0.hasSuffix(".deb") }, "make deb first")
        try Subprocess.check(["dpkg-deb", "-x", debs + "/" + deb, dir])
        for program in ["usr/sbin/netpermd", "usr/bin/netpermctl"] {
            let d = try Subprocess.check(["readelf", "-d", dir + "/" + program]).stdout
            XCTAssertFalse(d.contains("RUNPATH") || d.contains("RPATH"), "\(program): \(d)")
            XCTAssertTrue(d.contains("BIND_NOW") || d.contains("Flags: NOW"), "\(program): \(d)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/usr/bin/netpermd"), "the daemon is in sbin")
    }
}
