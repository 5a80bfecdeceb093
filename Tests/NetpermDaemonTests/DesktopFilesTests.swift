// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
@testable import NetpermHost
import NetpermIO
import XCTest

/// Reading desktop files (DesktopFiles) from real directories: everyone's in XDG_DATA_DIRS order, a user's own for
/// that user only, and a hostile user's files passed over whatever the daemon itself could read.
final class DesktopFilesTests: XCTestCase {
    private var root = ""
    static let user: UInt32 = 4711

    override func setUpWithError() throws {
        var template = Array("/tmp/netpermd-desktop-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        root = String(cString: try XCTUnwrap(made))
    }

    override func tearDown() {
        _ = system("rm -rf '\(root)'")
    }

    private func write(_ path: String, _ text: String, owner: UInt32? = nil) throws {
        let full = root + "/" + path
        try Files.makeDirectory(Files.directory(of: full), mode: 0o755)
        XCTAssertTrue(FileManagerless.write(full, Array(text.utf8)))
        if let owner { XCTAssertEqual(chown(full, owner, owner), 0) }
    }

    private func entry(_ name: String) -> String { "[Desktop Entry]\nType=Application\nName=\(name)\nIcon=\(name.lowercased())\n" }

    func testEveryonesFilesInOrderAndAUsersOwn() throws {
        try write("a/applications/org.example.Maps.desktop", entry("Maps"))
        try write("b/applications/org.example.Maps.desktop", entry("Shadowed"))
        try write("b/applications/org.example.Notes.desktop", entry("Notes"))
        try write("b/applications/not-an-id.desktop", entry("Plain"))
        try write("home/.local/share/applications/org.example.Mine.desktop", entry("Mine"), owner: Self.user)
        try write("home/.local/share/flatpak/exports/share/applications/org.example.Flat.desktop", entry("Flat"),
                  owner: Self.user)
        let files = DesktopFiles(xdgDataDirs: "\(root)/a:relative:\(root)/b")
        XCTAssertEqual(files.dataDirs, ["\(root)/a", "\(root)/b", DesktopFiles.flatpakSystem, DesktopFiles.snapSystem])
        let r = files.read(users: [(Self.user, root + "/home")])
        XCTAssertEqual(r.catalog.system.mapValues(\.name), ["org.example.Maps": "Maps", "org.example.Notes": "Notes",
                                                            "not-an-id": "Plain"])
        XCTAssertEqual(r.catalog.users[Self.user]?.mapValues(\.name), ["org.example.Mine": "Mine", "org.example.Flat": "Flat"])
        XCTAssertTrue(r.watched.contains("\(root)/a/applications"))
        // Where a directory does not exist, the nearest one on the way to it is watched, so that making it is seen.
        var nearest = DesktopFiles.flatpakSystem + "/applications"
        while access(nearest, F_OK) != 0 { nearest = Files.directory(of: nearest) }
        XCTAssertTrue(r.watched.contains(nearest), "\(nearest) in \(r.watched)")
        XCTAssertTrue(r.watched.contains(root + "/home/.local/share/applications"), "\(r.watched)")
        XCTAssertEqual(DesktopFiles(xdgDataDirs: nil).dataDirs, ["/usr/local/share", "/usr/share", DesktopFiles.flatpakSystem,
                                                                 "/var/lib/snapd/desktop"])
    }

    /// Debian's desktop files (issue 47): IDs that are not reverse-DNS, subdirectories' `-`-joined IDs, Snap's
    /// `SNAP_APP.desktop`, TryExec= looked up in PATH, Exec='s program resolved, a user's Hidden=true for them only.
    func testDebiansFilesAsGLibReadsThem() throws {
        try write("bin/firefox-esr", "#!/bin/sh\n")
        XCTAssertEqual(chmod(root + "/bin/firefox-esr", 0o755), 0)
        try write("bin/not-executable", "x\n")
        try write("usr/applications/firefox-esr.desktop", entry("Firefox ESR")
            + "Name[de]=Firefox ESR (Webbrowser)\nTryExec=firefox-esr\nExec=firefox-esr %u\n")
        try write("usr/applications/gimp.desktop", entry("GIMP") + "TryExec=gimp-2.10\nExec=gimp-2.10 %U\n")
        try write("usr/applications/off.desktop", entry("Off") + "TryExec=\(root)/bin/not-executable\n")
        try write("usr/applications/vlc.desktop", entry("VLC") + "Exec=/usr/bin/vlc --started-from-file %U\n")
        try write("usr/applications/kde4/okular.desktop", entry("Okular"))
        try write("usr/applications/a/b/c/too-deep.desktop", entry("Deep"))
        try write("usr/applications/helper.desktop", entry("Helper") + "NoDisplay=true\n")
        try write("snap/applications/firefox_firefox.desktop", entry("Firefox"))
        try write("home/.local/share/applications/firefox-esr.desktop", entry("Firefox ESR") + "Hidden=true\n",
                  owner: Self.user)
        let files = DesktopFiles(xdgDataDirs: "\(root)/usr:\(root)/snap", path: "\(root)/bin:relative")
        let r = files.read(users: [(Self.user, root + "/home")])
        let c = r.catalog
        XCTAssertEqual(Set(c.system.keys), ["firefox-esr", "gimp", "off", "vlc", "kde4-okular", "helper", "firefox_firefox"])
        XCTAssertEqual(c.system["firefox-esr"]?.localizedNames, ["de": "Firefox ESR (Webbrowser)"])
        XCTAssertEqual(c.system["firefox-esr"]?.program, root + "/bin/firefox-esr", "Exec='s bare name, in PATH")
        XCTAssertEqual(c.system["firefox-esr"]?.exec, ["firefox-esr"])
        XCTAssertEqual(c.system["vlc"]?.exec, ["/usr/bin/vlc", "--started-from-file"])
        XCTAssertEqual(c.system["gimp"]?.tryExecMissing, true, "TryExec's program is in no PATH directory")
        XCTAssertEqual(c.system["off"]?.tryExecMissing, true, "not executable")
        XCTAssertEqual(c.system["firefox-esr"]?.tryExecMissing, false)
        XCTAssertNil(c.entry("gimp", uid: nil), "GLib drops it")
        XCTAssertEqual(c.entry("firefox-esr", uid: Self.user + 1)?.name, "Firefox ESR")
        XCTAssertNil(c.entry("firefox-esr", uid: Self.user), "the user's own Hidden=true deletes it for them")
        XCTAssertEqual(c.listed(uid: nil), ["firefox-esr", "vlc", "kde4-okular", "firefox_firefox"])
        XCTAssertEqual(c.listed(uid: Self.user), ["vlc", "kde4-okular", "firefox_firefox"])
        XCTAssertTrue(c.installed.contains("helper", uid: Self.user), "NoDisplay=true: installed, not listed")
        // The first data directory holding an ID wins, even when its file deletes the app.
        try write("first/applications/vlc.desktop", entry("VLC") + "Hidden=true\n")
        let shadowed = DesktopFiles(xdgDataDirs: "\(root)/first:\(root)/usr", path: root + "/bin").read(users: [])
        XCTAssertNil(shadowed.catalog.entry("vlc", uid: nil))
    }

    /// A symlink to /etc/shadow (or a hard link), a file of another owner, a FIFO, a huge file, binary bytes, a
    /// symlinked directory, and 10,000 files: none read, none blocks, at most `maxFilesPerDirectory` looked at.
    func testAHostileUsersFiles() throws {
        let apps = "home/.local/share/applications/"
        try write(apps + "org.example.Good.desktop", entry("Good\u{1B}[2J"), owner: Self.user)
        try write(apps + "org.example.Root.desktop", entry("Root's"), owner: 0)
        XCTAssertEqual(symlink("/etc/shadow", root + "/" + apps + "org.example.Shadow.desktop"), 0)
        XCTAssertEqual(mkfifo(root + "/" + apps + "org.example.Fifo.desktop", 0o644), 0)
        try write(apps + "org.example.Huge.desktop", entry("Huge") + String(repeating: "#", count: 1 << 20), owner: Self.user)
        let binary = root + "/" + apps + "org.example.Binary.desktop"
        XCTAssertTrue(FileManagerless.write(binary, Array("[Desktop Entry]\nName=".utf8) + [0xFF, 0xFE, 0x00, 0x1B]))
        XCTAssertEqual(chown(binary, Self.user, Self.user), 0)
        // A directory elsewhere, linked in: never walked.
        try write("elsewhere/applications/org.example.Linked.desktop", entry("Linked"), owner: Self.user)
        try Files.makeDirectory(root + "/home2/.local", mode: 0o755)
        XCTAssertEqual(symlink(root + "/elsewhere", root + "/home2/.local/share"), 0)
        let files = DesktopFiles(xdgDataDirs: root + "/none")
        let r = files.read(users: [(Self.user, root + "/home"), (Self.user + 1, root + "/home2")])
        XCTAssertEqual(r.catalog.users[Self.user].map { Array($0.keys) }, ["org.example.Good"])
        XCTAssertEqual(r.catalog.users[Self.user]?["org.example.Good"]?.name, "Good\\x1b[2J")
        XCTAssertNil(r.catalog.users[Self.user + 1])
        XCTAssertTrue(r.skipped.contains { $0.hasSuffix("org.example.Shadow.desktop: not owned by uid \(Self.user)") }, "\(r.skipped)")
        XCTAssertTrue(r.skipped.contains { $0.hasSuffix("org.example.Fifo.desktop: not a regular file") })

        // 10,000 files: the first 1,000 read, the rest said once.
        let many = root + "/many/applications"
        try Files.makeDirectory(many, mode: 0o755)
        for i in 0..<10_000 { _ = FileManagerless.write(many + "/org.example.App\(i).desktop", Array(entry("A").utf8)) }
        let big = DesktopFiles(xdgDataDirs: root + "/many").read(users: [])
        XCTAssertEqual(big.catalog.system.count, DesktopFiles.maxFilesPerDirectory)
        XCTAssertTrue(big.skipped.contains { $0.contains("more than 1000 desktop files") })
    }
}

/// A file's bytes written with plain syscalls (the tests import no Foundation).
enum FileManagerless {
    static func write(_ path: String, _ bytes: [UInt8]) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) } == bytes.count
    }
}

extension DesktopFilesTests {
    /// The files an entry runs, by device and inode: everyone's entries only where root alone can write the program
    /// (a program below /tmp is anyone's to replace), a script's interpreter and script, a user's own entries always.
    func testWhatAnEntryRunsByDeviceAndInode() throws {
        try write("a/applications/true.desktop", entry("True") + "Exec=/usr/bin/true %U\n")
        try write("a/applications/anyones.desktop", entry("Anyone's") + "Exec=\(root)/prog\n")
        try write("a/applications/script.desktop", entry("Script") + "Exec=\(root)/script --x\n")
        try write("a/applications/interpreted.desktop", entry("Interp") + "Exec=sh \(root)/script\n")
        try write("prog", "\u{7f}ELF")
        try write("script", "#!/bin/sh\necho\n")
        XCTAssertEqual(chmod(root + "/prog", 0o755), 0)
        XCTAssertEqual(chmod(root + "/script", 0o755), 0)
        let catalog = DesktopFiles(xdgDataDirs: "\(root)/a").read(users: []).catalog
        let id = try Files.fileID("/usr/bin/true")
        XCTAssertEqual(catalog.system["true"]?.programFile, FileKey(device: id.device, inode: id.inode))
        XCTAssertNil(catalog.system["anyones"]?.programFile, "\(root) is below /tmp: not only root's")
        XCTAssertNil(catalog.system["script"]?.scriptFile, "a script below /tmp neither")
        XCTAssertNil(catalog.system["script"]?.programFile, "a script's file is never its program")
        // As a user's own entry, what the user runs is theirs to name.
        let own = DesktopFiles(xdgDataDirs: "\(root)/a")
        var e = DesktopEntry(name: "Interp")
        e.exec = ["sh", root + "/script"]
        let completed = own.completed(e, owner: 1000)
        let sh = try Files.fileID("/bin/sh"), script = try Files.fileID(root + "/script")
        XCTAssertEqual(completed.interpreterFile, FileKey(device: sh.device, inode: sh.inode))
        XCTAssertEqual(completed.scriptFile, FileKey(device: script.device, inode: script.inode))
        XCTAssertNil(completed.programFile)
        XCTAssertEqual(DesktopFiles.shebang(root + "/script"), "/bin/sh")
        XCTAssertNil(DesktopFiles.shebang("/usr/bin/true"))
    }
}
