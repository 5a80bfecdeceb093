// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO
import NetpermPolicy

/// The config file and its drop-ins (`NAME.d/*.conf` beside it, in lexical order), read from disk and parsed.
public enum ConfigFiles {
    public struct Unreadable: Error, CustomStringConvertible {
        public var path: String
        public var reason: Files.ReadError
        public var description: String { "\(path): cannot read: \(reason)" }
    }

    /// `/etc/netpermd/netpermd.conf` -> `/etc/netpermd/netpermd.conf.d`.
    public static func dropInDirectory(for path: String) -> String { path + ".d" }

    /// Reads the main file (a missing one is empty unless `required`) and every drop-in. With `streams` (netpermctl
    /// check, never the daemon) the main file may be a pipe or another stream, read to its end.
    public static func read(_ path: String, required: Bool, streams: Bool = false) throws(Unreadable)
        -> [(path: String, text: String)] {
        var files: [(path: String, text: String)] = []
        do {
            let bytes = streams ? try Files.readAny(path) : try Files.read(path)
            files.append((path, String(decoding: bytes, as: UTF8.self)))
        } catch where required || error.errno != .notFound {
            throw Unreadable(path: path, reason: error)
        } catch {}
        let dir = dropInDirectory(for: path)
        let names: [String]
        do { names = try Files.list(dir) } catch { throw Unreadable(path: dir, reason: .system(error)) }
        for name in names.filter({ $0.hasSuffix(".conf") }).sorted() {
            let p = "\(dir)/\(name)"
            do { files.append((p, String(decoding: try Files.read(p), as: UTF8.self))) } catch {
                throw Unreadable(path: p, reason: error)
            }
        }
        return files
    }

    /// Reads and parses: the policy, or why not (unreadable files count as errors).
    public static func load(_ path: String, required: Bool, accounts: AccountResolver) -> ConfigParseResult {
        do {
            return Config.parse(files: try read(path, required: required), accounts: accounts)
        } catch {
            return ConfigParseResult(unreadable: ConfigError(path: error.path, line: 0, message: "cannot read: \(error.reason)"))
        }
    }
}
