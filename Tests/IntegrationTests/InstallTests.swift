// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `make install-files` and `make uninstall` into a DESTDIR: what lands where with which mode, that an
/// administrator's configuration is never overwritten, and that uninstall leaves nothing else behind.
final class InstallTests: XCTestCase {
    /// Every file install-files and install-settings write under PREFIX=/usr/local, with its mode.
    static let installed: [(path: String, mode: mode_t)] = [
        ("usr/local/sbin/netpermd", 0o755),
        ("usr/local/bin/netpermctl", 0o755),
        ("usr/local/lib/systemd/system/netpermd.service", 0o644),
        ("usr/local/lib/systemd/system/netpermd.socket", 0o644),
        ("usr/local/lib/systemd/system/netpermd-metrics.service", 0o644),
        ("usr/local/lib/systemd/system/netpermd-metrics.timer", 0o644),
        ("usr/local/lib/systemd/system/netpermd-metrics.path", 0o644),
        ("usr/local/lib/systemd/user/netpermd-agent.service", 0o644),
        // A symbolic link (its mode is always 777): the desktop agent in every user's graphical session.
        ("usr/local/lib/systemd/user/graphical-session.target.wants/netpermd-agent.service", 0o777),
        // Apps' scopes made by each user's own manager, in every session (docs/APPS.md).
        ("usr/local/lib/systemd/user/netpermd-scopes.service", 0o644),
        ("usr/local/lib/systemd/user/default.target.wants/netpermd-scopes.service", 0o777),
        ("usr/local/lib/sysusers.d/netpermd.conf", 0o644),
        ("usr/local/share/doc/netpermd/README.md", 0o644),
        ("usr/local/share/doc/netpermd/PROTOCOL.md", 0o644),
        ("usr/local/share/doc/netpermd/POLICY.md", 0o644),
        ("usr/local/share/doc/netpermd/CLASSIFICATION.md", 0o644),
        ("usr/local/share/doc/netpermd/ROUTING.md", 0o644),
        ("usr/local/share/doc/netpermd/ARCHITECTURE.md", 0o644),
        ("usr/local/share/doc/netpermd/SYSTEMD.md", 0o644),
        ("usr/local/share/doc/netpermd/SECURITY.md", 0o644),
        ("usr/local/share/doc/netpermd/ENFORCEMENT.md", 0o644),
        ("usr/local/share/doc/netpermd/APPS.md", 0o644),
        ("usr/local/share/doc/netpermd/METRICS.md", 0o644),
        ("usr/local/share/doc/netpermd/USAGE.md", 0o644),
        ("usr/local/share/doc/netpermd/DBUS.md", 0o644),
        ("usr/local/share/doc/netpermd/PRIVACY.md", 0o644),
        ("usr/local/share/doc/netpermd/SETTINGS.md", 0o644),
        ("usr/local/share/netpermd/netpermd-enforcement.conf", 0o644),
        ("usr/local/share/netpermd/netpermd-steer.conf", 0o644),
        ("usr/local/share/doc/netpermd/netpermd.conf.example", 0o644),
        ("usr/local/share/man/man1/netpermctl.1", 0o644),
        ("usr/local/share/man/man5/netpermd.conf.5", 0o644),
        ("usr/local/share/man/man8/netpermd.8", 0o644),
        ("usr/local/share/bash-completion/completions/netpermctl", 0o644),
        ("usr/local/share/zsh/site-functions/_netpermctl", 0o644),
        ("etc/netpermd/netpermd.conf", 0o644),
        // The bus face: where dbus-daemon and polkitd read them, whatever PREFIX.
        ("usr/share/dbus-1/interfaces/org.netpermd.NetPerm1.xml", 0o644),
        ("usr/share/dbus-1/system.d/org.netpermd.NetPerm1.conf", 0o644),
        ("usr/share/polkit-1/actions/org.netpermd.NetPerm1.policy", 0o644),
        // The settings app (install-settings).
        ("usr/local/bin/netpermd-settings", 0o755),
        ("usr/local/share/man/man1/netpermd-settings.1", 0o644),
        ("usr/local/share/applications/org.netpermd.Settings.desktop", 0o644),
        // App Activity's module and template.
        ("usr/local/share/netpermd-settings/netpermd_settings/activity.py", 0o644),
        ("usr/local/share/netpermd-settings/netpermd_settings/ui/activity-page.ui", 0o644),
        ("usr/local/share/metainfo/org.netpermd.Settings.metainfo.xml", 0o644),
        ("usr/local/share/icons/hicolor/scalable/apps/org.netpermd.Settings.svg", 0o644),
    ] + ["__init__", "apps", "bus", "data", "main", "model", "protocol", "steps", "text", "verdicts", "waiting", "window"].map {
        ("usr/local/share/netpermd-settings/netpermd_settings/\($0).py", 0o644)
    } + ["app-page", "app-row", "data-page", "data-row", "waiting-page", "window"].map {
        ("usr/local/share/netpermd-settings/netpermd_settings/ui/\($0).ui", 0o644)
    } + ["de", "zh_CN"].flatMap { lang in
        // The catalogues: the settings app's (install-settings) and the notification agent's (install-files).
        ["netpermd-settings", "netpermctl"].map { ("usr/local/share/locale/\(lang)/LC_MESSAGES/\($0).mo", 0o644) }
    }

    private var destdir = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        _ = try Repository.requireTool("make", package: "make")
        for bin in ["netpermd", "netpermctl"] where access(IntegrationTestCase.binDir + "/" + bin, X_OK) != 0 {
            throw HarnessError("\(IntegrationTestCase.binDir)/\(bin) is missing: build first (swift build) or set NETPERMD_BIN")
        }
        destdir = try makeTempDir() + "/root"
    }

    /// `make -C <repository> TARGET DESTDIR=... PREFIX=...`, outside any make that runs the tests (its
    /// jobserver descriptors are not passed on).
    @discardableResult
    private func make(_ target: String, prefix: String = "/usr/local", file: StaticString = #filePath,
                      line: UInt = #line) throws -> CommandResult {
        let r = try Subprocess.run(["env", "-u", "MAKEFLAGS", "-u", "MFLAGS", "-u", "MAKELEVEL", "make", "-C",
                                    Repository.root, target, "DESTDIR=\(destdir)", "PREFIX=\(prefix)",
                                    "BIN=\(IntegrationTestCase.binDir)"], timeout: 60)
        XCTAssertEqual(r.status, 0, r.summary, file: file, line: line)
        return r
    }

    /// Every entry under DESTDIR, relative to it, with its type and permission bits.
    private func tree() -> [String: (isDirectory: Bool, mode: mode_t)] {
        var result: [String: (Bool, mode_t)] = [:]
        guard let e = FileManager.default.enumerator(atPath: destdir) else { return [:] }
        while let rel = e.nextObject() as? String {
            var st = stat()
            guard lstat(destdir + "/" + rel, &st) == 0 else { continue }
            result[rel] = ((st.st_mode & S_IFMT) == S_IFDIR, st.st_mode & 0o7777)
        }
        return result
    }

    func testInstallPutsEveryFileInPlaceAndUninstallRemovesAllButTheConfiguration() throws {
        try make("install-files")
        try make("install-settings")
        let installed = tree()
        for (path, mode) in Self.installed {
            guard let entry = installed[path] else {
                XCTFail("install-files did not install \(path)")
                continue
            }
            XCTAssertFalse(entry.isDirectory, path)
            XCTAssertEqual(String(entry.mode, radix: 8), String(mode, radix: 8), "mode of \(path)")
        }
        let unexpected = installed.filter { !$0.value.isDirectory }.keys
            .filter { p in !Self.installed.contains { $0.path == p } }
        XCTAssertEqual(unexpected.sorted(), [], "files install-files wrote that this test does not know about")
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(
            atPath: destdir + "/usr/local/lib/systemd/user/graphical-session.target.wants/netpermd-agent.service"),
                       "../netpermd-agent.service")

        // The installed pages are the repository's (PREFIX=/usr/local changes nothing in them).
        for page in Repository.manPages {
            let section = page.split(separator: ".").last!
            XCTAssertEqual(try String(contentsOfFile: "\(destdir)/usr/local/share/man/man\(section)/\(page)", encoding: .utf8),
                           try Repository.read("man/" + page), page)
        }

        try make("uninstall")
        let left = tree().filter { !$0.value.isDirectory }.keys.sorted()
        XCTAssertEqual(left, ["etc/netpermd/netpermd.conf"], "uninstall leaves only the administrator's policy")
    }

    func testInstallNeverOverwritesAnExistingConfiguration() throws {
        let conf = destdir + "/etc/netpermd/netpermd.conf"
        try FileManager.default.createDirectory(atPath: destdir + "/etc/netpermd", withIntermediateDirectories: true)
        let mine = "# the administrator's own policy\n[Defaults]\nWWAN=deny\n"
        try mine.write(toFile: conf, atomically: true, encoding: .utf8)
        chmod(conf, 0o600)

        try make("install-files")
        XCTAssertEqual(try String(contentsOfFile: conf, encoding: .utf8), mine, "install-files overwrote the policy")
        XCTAssertEqual(tree()["etc/netpermd/netpermd.conf"].map { String($0.mode, radix: 8) }, "600")
        // Installing again over an installation (an upgrade) works and still leaves it alone.
        try make("install-files")
        XCTAssertEqual(try String(contentsOfFile: conf, encoding: .utf8), mine)

        try make("uninstall")
        XCTAssertEqual(try String(contentsOfFile: conf, encoding: .utf8), mine, "uninstall touched the policy")
        XCTAssertEqual(tree().filter { !$0.value.isDirectory }.keys.sorted(), ["etc/netpermd/netpermd.conf"])
    }

    /// `make install-gio` (part of `make install`) puts the GLib module into DESTDIR + GLib's own module directory
    /// and rebuilds that directory's cache, which must list it for the network-monitor extension point (GLib loads a
    /// module only for the points its cache names); `make uninstall` takes both away again. The host's module
    /// directory is left as it was.
    func testTheGLibModuleGoesIntoGLibsModuleDirectoryWithItsCache() throws {
        let moduleDir = try Subprocess.check(["pkg-config", "--variable=giomoduledir", "gio-2.0"]).stdout
            .trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(moduleDir.hasPrefix("/"), moduleDir)
        let hostCache = try? String(contentsOfFile: moduleDir + "/giomodule.cache", encoding: .utf8)
        let rel = String(moduleDir.dropFirst())

        try make("install-gio")
        let installed = tree()
        XCTAssertEqual(installed[rel + "/libgionetpermd.so"].map { String($0.mode, radix: 8) }, "644")
        XCTAssertEqual(installed.filter { !$0.value.isDirectory }.keys.sorted(),
                       [rel + "/giomodule.cache", rel + "/libgionetpermd.so"])
        XCTAssertEqual(try String(contentsOfFile: destdir + "/" + rel + "/giomodule.cache", encoding: .utf8),
                       "libgionetpermd.so: gio-network-monitor\n")

        try make("uninstall")
        XCTAssertEqual(tree().filter { !$0.value.isDirectory }.keys.sorted(), [], "the module and its cache are gone")
        XCTAssertFalse(FileManager.default.fileExists(atPath: moduleDir + "/libgionetpermd.so"),
                       "the host's module directory was not touched")
        XCTAssertEqual(try? String(contentsOfFile: moduleDir + "/giomodule.cache", encoding: .utf8), hostCache)
    }

    /// With another PREFIX, the pages and units name the installed paths, not /usr/local.
    func testPrefixIsWrittenIntoThePagesAndUnits() throws {
        try make("install-files", prefix: "/usr")
        for path in ["usr/share/man/man1/netpermctl.1", "usr/share/man/man5/netpermd.conf.5",
                     "usr/share/man/man8/netpermd.8", "usr/lib/systemd/system/netpermd.service",
                     "usr/lib/systemd/user/netpermd-agent.service", "usr/lib/systemd/user/netpermd-scopes.service"] {
            let text = try String(contentsOfFile: destdir + "/" + path, encoding: .utf8)
            XCTAssertFalse(text.contains("/usr/local"), "\(path) still names /usr/local")
        }
        let page = try String(contentsOfFile: destdir + "/usr/share/man/man8/netpermd.8", encoding: .utf8)
        XCTAssertTrue(page.contains("/usr/share/doc/netpermd/"), "netpermd.8 points at the installed docs")
        try make("uninstall", prefix: "/usr")
        XCTAssertEqual(tree().filter { !$0.value.isDirectory }.keys.sorted(), ["etc/netpermd/netpermd.conf"])
    }
}
