// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Config problems as users meet them: `netpermctl check` lists every error and warning, the daemon logs
/// warnings with file:line and still loads, and a failed reload names its first error and how many more.
final class ConfigWarningTests: IntegrationTestCase {
    /// Two errors (lines 2 and 5) and a warning (line 3) between them.
    private static let twoErrorsOneWarning = """
        [Defaults]
        WWAN=maybe
        Wifi=deny
        [App updater]
        Executable=relative/updater

        """

    /// The standard config plus an [Interface] with a typo in one key (line 8).
    private static let warningsOnly = IntegrationTestCase.standardConfig + """

        [Interface usb*]
        Kindd=wwan
        Metered=yes

        """

    func testCheckPrintsEveryErrorAndWarning() throws {
        let dir = try makeTempDir()
        let bad = "\(dir)/bad.conf"
        try Self.twoErrorsOneWarning.write(toFile: bad, atomically: true, encoding: .utf8)
        let r = try ctl(["check", bad])
        XCTAssertEqual(r.status, 1, r.summary)
        XCTAssertEqual(r.stdout, "", r.summary)
        XCTAssertEqual(r.stderr, """
            \(bad):2: [Defaults]: bad value 'maybe' for WWAN= (expected allow, deny or ask)
            \(bad):3: warning: [Defaults]: unknown key 'Wifi' (did you mean WiFi=? keys are case-sensitive); ignored
            \(bad):5: [App updater]: Executable= must be an absolute path or glob, got 'relative/updater'
            \(bad): invalid (2 errors, 1 warning)

            """, r.summary)

        let warned = "\(dir)/warned.conf"
        try Self.warningsOnly.write(toFile: warned, atomically: true, encoding: .utf8)
        let ok = try ctl(["check", warned])
        XCTAssertEqual(ok.status, 0, ok.summary)
        XCTAssertEqual(ok.stderr, "\(warned):8: warning: [Interface usb*]: unknown key 'Kindd' (did you mean Kind=?); "
            + "ignored\n", ok.summary)
        XCTAssertEqual(ok.stdout, "\(warned): ok (1 file, 0 apps, 3 interface overrides, 1 warning)\n", ok.summary)

        // Errors in the main file and a drop-in: all of them, the main file's first.
        try FileManager.default.createDirectory(atPath: bad + ".d", withIntermediateDirectories: false)
        let dropIn = bad + ".d/50-site.conf"
        try "[App updater]\nWiFi=sometimes\n".write(toFile: dropIn, atomically: true, encoding: .utf8)
        let both = try ctl(["check", bad])
        XCTAssertEqual(both.status, 1, both.summary)
        XCTAssertEqual(both.stderr.split(separator: "\n").map { String($0.prefix { $0 != " " }) },
                       ["\(bad):2:", "\(bad):3:", "\(bad):5:", "\(dropIn):2:", "\(bad):"], both.summary)
        XCTAssertTrue(both.stderr.hasSuffix("\(bad): invalid (3 errors, 1 warning)\n"), both.summary)
    }

    /// A file with only warnings loads; each warning is logged with its file and line, at start-up and at every
    /// reload. A reload with three errors fails with the first and a count of the others, and logs all three.
    func testWarningsAreLoggedAndErrorsCounted() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let config = try writeConfig(Self.warningsOnly, in: dir)
        let d = try startDaemon(in: ns, socket: "\(dir)/netpermd.sock", config: config)
        let socket = d.socketPath
        let warning = "<4>\(config):8: warning: [Interface usb*]: unknown key 'Kindd' (did you mean Kind=?); ignored\n"
        func count(_ s: String) -> Int { d.log.components(separatedBy: s).count - 1 }
        XCTAssertEqual(count(warning), 1, d.logTail)
        XCTAssertTrue(d.log.contains("policy generation 1: 0 apps, 1 warning"), d.logTail)
        var p = try policyStatus(socket)
        XCTAssertEqual(p.generation, 1, "\(p)")
        XCTAssertNil(p.error, "\(p)")

        let reloaded = try request(socket, "RELOAD")
        XCTAssertEqual(try JSONValue.bool(reloaded, "ok"), true, "\(reloaded)")
        XCTAssertEqual(try JSONValue.int(reloaded, "generation"), 2, "\(reloaded)")
        XCTAssertEqual(count(warning), 2, "logged again at the reload: \(d.logTail)")
        // Issue 23: netpermctl reload said "generation 4, 4 apps" and nothing of them; now it counts and shows them.
        let ctlWarned = try ctl(["--socket", socket, "reload"])
        XCTAssertEqual(ctlWarned.status, 0, ctlWarned.summary)
        XCTAssertEqual(ctlWarned.stdout, "policy reloaded: generation 3, 0 apps, 1 warning\n\(config):8: warning: "
            + "[Interface usb*]: unknown key 'Kindd' (did you mean Kind=?); ignored\n", ctlWarned.summary)
        let terseWarned = try ctl(["--socket", socket, "-t", "reload"])
        XCTAssertEqual(terseWarned.lines, ["policy-generation:4", "policy-apps:0", "policy-warnings:1"],
                       terseWarned.summary)

        // Three errors: RELOAD names the first and counts the others, whichever reload (this one or
        // inotify's) reads the file first.
        let broken = """
            [Defaults]
            WWAN=maybe
            [App a]
            User=1
            Other=sometimes
            [Interface x]
            Kind=cable

            """
        _ = try writeConfig(broken, in: dir)
        let first = "\(config):2: [Defaults]: bad value 'maybe' for WWAN= (expected allow, deny or ask)"
        let failed = try request(socket, "RELOAD")
        XCTAssertEqual(try JSONValue.bool(failed, "ok"), false, "\(failed)")
        XCTAssertEqual(failed["error"] as? String, "policy-invalid", "\(failed)")
        XCTAssertEqual(failed["message"] as? String, first + " (and 2 more errors)", "\(failed)")
        p = try policyStatus(socket)
        XCTAssertEqual(p.error, first + " (and 2 more errors)", "\(p)")
        XCTAssertEqual(p.generation, 4, "the last good policy stays: \(p)")
        for line in [first, "\(config):5: [App a]: bad value 'sometimes' for Other= (expected allow, deny or ask)",
                     "\(config):7: [Interface x]: bad value 'cable' for Kind= (expected one of: wifi, wwan, ethernet, "
                        + "loopback, other)"] {
            XCTAssertTrue(d.log.contains("<3>\(line)\n"), "every error has its own log line: \(line)\n\(d.logTail)")
        }
        XCTAssertTrue(d.log.contains("<3>policy reload failed, keeping generation 4: \(first) (and 2 more errors)\n"),
                      d.logTail)
        let ctlReload = try ctl(["--socket", socket, "reload"])
        XCTAssertEqual(ctlReload.status, 1, ctlReload.summary)
        XCTAssertEqual(ctlReload.stderr, "netpermctl: policy-invalid: \(first) (and 2 more errors)\n", ctlReload.summary)
    }
}
