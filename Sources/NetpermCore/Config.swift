/// The daemon's configuration: the main file plus drop-ins, merged in order.
public struct Config: Equatable, Sendable {
    public var interfaces: [InterfaceOverride] = []

    public init() {}

    /// Parses files in the order given (main file first, then drop-ins in lexical order).
    public static func parse(files: [(path: String, text: String)]) throws(ConfigError) -> Config {
        var config = Config()
        for file in files {
            for section in try Ini.parse(file.text, path: file.path) {
                try config.apply(section)
            }
        }
        return config
    }

    private mutating func apply(_ s: IniSection) throws(ConfigError) {
        func fail(_ line: Int, _ message: String) -> ConfigError {
            ConfigError(path: s.path, line: line, message: message)
        }
        switch s.name {
        case "Interface":
            guard let arg = s.argument, !arg.isEmpty else {
                throw fail(s.line, "[Interface] needs a name or glob, e.g. [Interface wwan*]")
            }
            let glob: Glob
            do { glob = try Glob(arg) } catch { throw fail(s.line, error.message) }
            var o = InterfaceOverride(glob: glob, kind: nil, metered: nil)
            for e in s.entries {
                switch e.key {
                case "Kind":
                    guard let k = LinkKind(rawValue: e.value.lowercased()) else {
                        throw fail(e.line, "bad value '\(e.value)' for Kind= (expected one of: "
                            + LinkKind.allCases.map(\.rawValue).joined(separator: ", ") + ")")
                    }
                    o.kind = k
                case "Metered":
                    guard let m = Ini.parseBool(e.value) else {
                        throw fail(e.line, "bad value '\(e.value)' for Metered= (expected yes or no)")
                    }
                    o.metered = m
                default:
                    throw fail(e.line, "unknown key '\(e.key)' in [Interface] (expected Kind= or Metered=)")
                }
            }
            if o.kind == nil && o.metered == nil {
                throw fail(s.line, "[Interface \(arg)] sets neither Kind= nor Metered=")
            }
            interfaces.append(o)
        default:
            throw fail(s.line, "unknown section [\(s.name)] (expected [Interface GLOB])")
        }
    }
}
