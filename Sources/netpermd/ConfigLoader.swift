import NetpermCore
import NetpermIO

/// Reads the config file from disk; parsing is the core's.
enum ConfigLoader {
    enum Failure: Error, CustomStringConvertible {
        case unreadable(String)
        case invalid(ConfigError)
        var description: String {
            switch self {
            case let .unreadable(p): return "\(p): cannot read the configuration file"
            case let .invalid(e): return e.description
            }
        }
    }

    /// A missing default file means "no configuration"; a missing file the user named is an error.
    static func load(path: String, required: Bool) throws(Failure) -> Config {
        guard let bytes = FD.readFile(path) else {
            if required || FD.exists(path) { throw .unreadable(path) }
            Log.info("\(path) does not exist; using built-in defaults")
            return Config()
        }
        do {
            return try Config.parse(files: [(path, String(decoding: bytes, as: UTF8.self))])
        } catch {
            throw .invalid(error)
        }
    }
}
