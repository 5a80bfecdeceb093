// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import Glibc
import NetpermIO
import XCTest

/// AtomicFile.write: what failed before the rename is thrown and leaves the old file; a failure after it (the
/// directory's fsync) leaves the new file in place and is returned, so that its caller can say the content is
/// written (issue 26: a decision on disk was reported as not stored).
final class AtomicWriteTests: XCTestCase {
    private var dir = ""
    private var path: String { dir + "/f.conf" }

    override func setUpWithError() throws {
        var template = Array("/tmp/npt-atomic-XXXXXX".utf8CString)
        guard let d = mkdtemp(&template) else { throw Errno(errno) }
        dir = String(cString: d)
        try AtomicFile.write(path, "old\n")
    }

    override func tearDown() {
        for name in (try? Files.list(dir)) ?? [] {
            if (try? Files.remove(dir + "/" + name)) == nil { rmdir(dir + "/" + name) }
        }
        rmdir(dir)
    }

    private func content() throws -> String { String(decoding: try Files.read(path), as: UTF8.self) }

    func testAFailureBeforeTheRenameIsThrownAndTheOldFileStays() throws {
        // Root may write anywhere: a temporary file in a directory that does not exist cannot be made.
        XCTAssertThrowsError(try AtomicFile.write(path, "new\n", temporaryPath: { p, _ in p + ".none/tmp" })) {
            XCTAssertEqual(($0 as? Errno)?.code, ENOENT)
        }
        XCTAssertEqual(try content(), "old\n")
    }

    /// Issue 31, point 14: the metrics textfile's writer followed a symlink planted at `FILE.tmp` and overwrote its
    /// target. The temporary file is made with O_EXCL and O_NOFOLLOW under a name of its own: a planted link is
    /// never followed, at the old name or at the very name the writer picks.
    func testALinkPlantedWhereTheTemporaryFileGoesIsNotFollowed() throws {
        let victim = dir + "/victim"
        try AtomicFile.write(victim, "keep\n")
        XCTAssertEqual(symlink(victim, path + ".tmp"), 0)
        try AtomicFile.write(path, "new\n")
        XCTAssertEqual(try content(), "new\n")
        XCTAssertEqual(String(decoding: try Files.read(victim), as: UTF8.self), "keep\n", "the link's target is untouched")
        // Planted at the name the writer picks: refused, nothing written through it.
        XCTAssertThrowsError(try AtomicFile.write(path, "newer\n", temporaryPath: { p, _ in p + ".tmp" })) {
            XCTAssertEqual(($0 as? Errno)?.code, EEXIST)
        }
        XCTAssertEqual(String(decoding: try Files.read(victim), as: UTF8.self), "keep\n")
        XCTAssertEqual(try content(), "new\n")
    }

    /// The mode asked for, whatever the umask: under umask 077 the textfile was 0600, which node_exporter's user
    /// cannot read.
    func testTheModeIsTheOneAskedForWhateverTheUmask() throws {
        let old = umask(0o077)
        defer { umask(old) }
        try AtomicFile.write(path, "new\n", mode: 0o644)
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o644)
    }

    /// Two writers of one file (two `netpermctl metrics --output` runs) and a reader: every write takes, and the
    /// reader sees one whole content or the other, never a torn one (with one shared `FILE.tmp`, 4-8 of 35 writers
    /// failed with ENOENT and a reader saw 32 of 35 TYPE lines).
    func testTwoWritersAndAReaderNeverMeetATornFile() throws {
        let a = String(repeating: "a", count: 64 << 10) + "\n", b = String(repeating: "b", count: 64 << 10) + "\n"
        try AtomicFile.write(path, a)
        // Each writer's failures, read once its thread is done.
        final class Writer: @unchecked Sendable { var failures: [String] = [] }
        let p = path
        let writers = [a, b].map { text in
            let w = Writer()
            return (w, Thread {
                for _ in 0..<150 {
                    do { try AtomicFile.write(p, text) } catch { w.failures.append("write: \(error)") }
                }
            })
        }
        writers.forEach { $0.1.start() }
        var torn: [Int] = []
        var reads = 0
        while !writers.allSatisfy({ $0.1.isFinished }) {
            let got = String(decoding: try Files.read(path), as: UTF8.self)
            if got != a && got != b { torn.append(got.utf8.count) }
            reads += 1
        }
        XCTAssertEqual(writers.flatMap { $0.0.failures }, [])
        XCTAssertEqual(torn, [], "torn reads (bytes) of \(reads)")
        XCTAssertGreaterThan(reads, 0)
        XCTAssertEqual(try Files.list(dir).sorted(), ["f.conf"], "no temporary file left")
    }

    func testAFailedDirectorySyncAfterTheRenameIsReturnedWithTheNewFileInPlace() throws {
        var synced: [Int32] = []
        let failure = try AtomicFile.write(path, "new\n") { fd throws(Errno) in
            synced.append(fd)
            throw Errno(EIO)
        }
        XCTAssertEqual(failure?.code, EIO)
        XCTAssertEqual(synced.count, 1, "the directory's descriptor")
        XCTAssertEqual(try content(), "new\n")
        XCTAssertEqual(try Files.list(dir).sorted(), ["f.conf"], "no temporary file left")
    }

    func testASyncedWriteReturnsNothing() throws {
        XCTAssertNil(try AtomicFile.write(path, "new\n"))
        XCTAssertEqual(try content(), "new\n")
    }
}
