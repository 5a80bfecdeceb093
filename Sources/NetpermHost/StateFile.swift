// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermPolicy

/// A file of the state directory that only the daemon writes: read whole at start (one that is corrupt or unreadable
/// is moved aside with a logged error, and the daemon starts without it rather than refusing to start), replaced
/// atomically. The decisions and the usage totals are two.
public struct StateFile: Sendable {
    public let path: String
    /// "decisions file", and what starting without it means: "starting with no stored decisions".
    let what: String
    let without: String
    /// What writing it is, for the errors of `save`.
    let operation: EdgeError.Operation
    /// fsync(2) of the state directory after the rename; the tests make it fail.
    let syncDirectory: @Sendable (Int32) throws(Errno) -> Void

    public init(_ path: String, what: String, without: String, operation: EdgeError.Operation,
                syncDirectory: @escaping @Sendable (Int32) throws(Errno) -> Void = AtomicFile.fsyncDirectory) {
        self.path = path; self.what = what; self.without = without; self.operation = operation
        self.syncDirectory = syncDirectory
    }

    /// The file parsed; `empty` when it is missing or unusable.
    public func load<T>(empty: T, _ parse: (String, String) throws(ConfigError) -> T) -> T {
        let bytes: [UInt8]
        // Read whole, however large: the daemon wrote it, and each line is something someone was told is kept.
        do { bytes = try Files.read(path, limit: .max) } catch {
            if error.errno != .notFound { setAside("cannot read \(path): \(error)") }
            return empty
        }
        do {
            return try parse(String(decoding: bytes, as: UTF8.self), path)
        } catch {
            setAside("\(error)")
            return empty
        }
    }

    private func setAside(_ why: String) {
        let whereTo: String
        do { whereTo = try AtomicFile.moveAside(path) } catch { whereTo = "nowhere (rename failed: \(error))" }
        Log.err("\(what) is unusable (\(why)); moved it to \(whereTo) and \(without)")
    }

    /// Writes `text` in place of the file's; safe on any thread (the daemon writes off its loop).
    public func save(_ text: String) -> StoreOutcome {
        do throws(Errno) {
            if let e = try AtomicFile.write(path, text, syncDirectory: syncDirectory) {
                return .storedNotSynced(EdgeError(operation, errno: e.code, "\(Files.directory(of: path)): \(e)"))
            }
            return .stored
        } catch {
            return .failed(EdgeError(operation, errno: error.code, "\(path): \(error)"))
        }
    }
}

/// How writing a state file went.
public enum StoreOutcome: Equatable, Sendable {
    case stored
    /// In place (renamed over the old file), but the directory's fsync failed: the content is on disk and in force,
    /// though a crash before the kernel writes the directory may bring the old file back.
    case storedNotSynced(EdgeError)
    /// Nothing replaced: the old file stands.
    case failed(EdgeError)
}
