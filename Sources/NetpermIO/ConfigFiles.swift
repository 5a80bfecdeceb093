import Glibc

/// The config file and its drop-ins (`NAME.d/*.conf` beside it, in lexical order), read from disk.
public enum ConfigFiles {
    public enum Failure: Error, CustomStringConvertible {
        case unreadable(String, Errno)
        public var description: String {
            switch self {
            case let .unreadable(p, e): return "\(p): cannot read: \(e)"
            }
        }
    }

    /// `/etc/netpermd/netpermd.conf` -> `/etc/netpermd/netpermd.conf.d`.
    public static func dropInDirectory(for path: String) -> String { path + ".d" }

    /// Reads the main file (a missing one is empty unless `required`) and every drop-in.
    public static func read(_ path: String, required: Bool) throws(Failure) -> [(path: String, text: String)] {
        var files: [(path: String, text: String)] = []
        if let bytes = FD.readFile(path) {
            files.append((path, String(decoding: bytes, as: UTF8.self)))
        } else if required || errno != ENOENT {
            throw .unreadable(path, Errno.current)
        }
        let dir = dropInDirectory(for: path)
        for name in list(dir).filter({ $0.hasSuffix(".conf") }).sorted() {
            let p = "\(dir)/\(name)"
            guard let bytes = FD.readFile(p) else { throw .unreadable(p, Errno.current) }
            files.append((p, String(decoding: bytes, as: UTF8.self)))
        }
        return files
    }

    static func list(_ dir: String) -> [String] {
        guard let d = opendir(dir) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." && !name.hasPrefix(".") { names.append(name) }
        }
        return names
    }
}
