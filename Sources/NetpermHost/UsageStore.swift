import NetpermCore
import NetpermIO

/// The usage totals on disk in the state directory (`usage`, docs/USAGE.md): read at start, written atomically.
public struct UsageStore: Sendable {
    public let path: String

    public init(stateDir: String) {
        path = stateDir + "/usage"
    }

    /// A corrupt or unreadable file is moved aside with a logged error, and counting starts from nothing; a missing
    /// file is nothing counted yet.
    public func load() -> UsageBook {
        let bytes: [UInt8]
        do { bytes = try Files.read(path, limit: .max) } catch {
            if error.errno != .notFound { setAside("cannot read \(path): \(error)") }
            return UsageBook()
        }
        do {
            return try UsageBook.parse(String(decoding: bytes, as: UTF8.self), path: path)
        } catch {
            setAside("\(error)")
            return UsageBook()
        }
    }

    private func setAside(_ why: String) {
        let whereTo: String
        do { whereTo = try AtomicFile.moveAside(path) } catch { whereTo = "nowhere (rename failed: \(error))" }
        Log.err("usage file is unusable (\(why)); moved it to \(whereTo) and counting from nothing")
    }

    public func save(_ book: UsageBook) throws(Errno) {
        try AtomicFile.write(path, book.encoded())
    }
}
