// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermIO
import NetpermPolicy

/// The privacy report on disk in the state directory (`report`, docs/PRIVACY.md): read at start, written
/// atomically, deleted when the report is turned off.
public struct ReportStore: Sendable {
    let file: StateFile
    public var path: String { file.path }

    public init(stateDir: String,
                syncDirectory: @escaping @Sendable (Int32) throws(Errno) -> Void = AtomicFile.fsyncDirectory) {
        file = StateFile(stateDir + "/report", what: "report file", without: "starting an empty report",
                         operation: .saveReport, syncDirectory: syncDirectory)
    }

    /// A missing file is nothing kept yet.
    public func load() -> ReportBook {
        file.load(empty: ReportBook()) { (text: String, path: String) throws(ConfigError) -> ReportBook in
            try ReportBook.parse(text, path: path)
        }
    }

    public func save(_ book: ReportBook) -> StoreOutcome { file.save(book.encoded()) }

    /// Deletes the file (none is fine), and syncs its directory so that a crash does not bring it back.
    public func remove() -> StoreOutcome {
        do throws(Errno) {
            try Files.remove(path)
        } catch where error.code == ENOENT {
            return .stored
        } catch {
            return .failed(EdgeError(.saveReport, errno: error.code, "\(path): \(error)"))
        }
        do throws(Errno) {
            let dfd = try sys { open(Files.directory(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            defer { FD.close(dfd) }
            try AtomicFile.fsyncDirectory(dfd)
            return .stored
        } catch {
            return .storedNotSynced(EdgeError(.saveReport, errno: error.code, "\(Files.directory(of: path)): \(error)"))
        }
    }
}
