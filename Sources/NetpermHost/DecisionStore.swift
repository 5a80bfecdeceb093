import NetpermCore
import NetpermIO

/// Lasting decisions on disk in the state directory (`decisions.conf`, readable INI).
public struct DecisionStore: Sendable {
    public let path: String
    /// fsync(2) of the state directory after the rename; the tests make it fail.
    private let syncDirectory: @Sendable (Int32) throws(Errno) -> Void

    public init(stateDir: String,
                syncDirectory: @escaping @Sendable (Int32) throws(Errno) -> Void = AtomicFile.fsyncDirectory) {
        self.syncDirectory = syncDirectory
        path = stateDir + "/decisions.conf"
        do { try Files.makeDirectory(stateDir) } catch {
            Log.err("cannot create the state directory \(stateDir): \(error)")
        }
    }

    /// A corrupt or unreadable file is moved aside with a logged error: the daemon starts with no decisions
    /// rather than refusing to start. A missing file is no decisions.
    public func load() -> Decisions {
        let bytes: [UInt8]
        // Read whole, however large: the daemon wrote it, and each line is a decision someone was told is kept.
        do { bytes = try Files.read(path, limit: .max) } catch {
            if error.errno != .notFound { setAside("cannot read \(path): \(error)") }
            return Decisions()
        }
        do {
            return try Decisions.parse(String(decoding: bytes, as: UTF8.self), path: path)
        } catch {
            setAside("\(error)")
            return Decisions()
        }
    }

    private func setAside(_ why: String) {
        let whereTo: String
        do { whereTo = try AtomicFile.moveAside(path) } catch { whereTo = "nowhere (rename failed: \(error))" }
        Log.err("decisions file is unusable (\(why)); moved it to \(whereTo) and starting with no stored decisions")
    }

    /// Writes the decisions in place of the file's; safe on any thread (the daemon writes off its loop).
    public func save(_ d: Decisions) -> StoreOutcome {
        do throws(Errno) {
            if let e = try AtomicFile.write(path, d.encoded(), syncDirectory: syncDirectory) {
                return .storedNotSynced("\(Files.directory(of: path)): \(e)")
            }
            return .stored
        } catch {
            return .failed("\(path): \(error)")
        }
    }
}

/// How writing the decisions went.
public enum StoreOutcome: Equatable, Sendable {
    case stored
    /// In place (renamed over the old file), but the directory's fsync failed: the decision is on disk and in force,
    /// though a crash before the kernel writes the directory may bring the old file back.
    case storedNotSynced(String)
    /// Nothing replaced: the old file stands.
    case failed(String)
}
