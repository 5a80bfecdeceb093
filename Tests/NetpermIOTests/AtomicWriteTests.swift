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
        // Root may write anywhere: a directory where the temporary file goes makes its open fail (EISDIR).
        XCTAssertEqual(mkdir(path + ".tmp", 0o700), 0)
        XCTAssertThrowsError(try AtomicFile.write(path, "new\n")) { XCTAssertEqual(($0 as? Errno)?.code, EISDIR) }
        XCTAssertEqual(try content(), "old\n")
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
