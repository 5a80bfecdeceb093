import Glibc
import NetpermCore
import NetpermIO

/// Lasting decisions on disk in the state directory (`decisions.conf`, readable INI).
struct DecisionStore {
    let path: String

    init(stateDir: String) {
        path = stateDir + "/decisions.conf"
        AtomicFile.makeDirectory(stateDir)
    }

    /// A corrupt or unreadable file is moved aside with a logged error: the daemon starts with no decisions
    /// rather than refusing to start.
    func load() -> Decisions {
        guard let bytes = FD.readFile(path) else {
            if FD.exists(path) { setAside("cannot read \(path): \(Errno.current)") }
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
        let aside = AtomicFile.moveAside(path)
        Log.err("decisions file is unusable (\(why)); moved it to \(aside ?? "nowhere: rename failed") and starting "
            + "with no stored decisions")
    }

    func save(_ d: Decisions) throws(Errno) {
        try AtomicFile.write(path, d.encoded())
    }
}
