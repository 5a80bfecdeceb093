import NetpermCore
import NetpermIO

/// Lasting decisions on disk in the state directory (`decisions.conf`, readable INI).
public struct DecisionStore: Sendable {
    public let path: String

    public init(stateDir: String) {
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

    /// The file's text, as `Decisions.encoded()` gives it (made on the loop, written on a thread of its own).
    public func save(_ text: String) throws(Errno) {
        try AtomicFile.write(path, text)
    }
}
