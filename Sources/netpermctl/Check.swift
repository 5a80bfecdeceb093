// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermPolicy
import NetpermPolicyFiles
import NetpermProtocol

/// `netpermctl check [PATH]`: validates the policy offline, with the same parser the daemon uses, and agrees with
/// the daemon about what it would load: no PATH means the daemon's default file, which may be missing (the daemon
/// then starts on built-in defaults); a PATH given must exist, as `--config PATH` must. PATH may be `-` (standard
/// input) or a pipe, read to its end and no more than the daemon would read of a file. Exit 1 on any error;
/// warnings alone pass.
enum Check {
    static let defaultPath = "/etc/netpermd/netpermd.conf"
    /// How findings name standard input.
    static let stdinName = "<stdin>"

    struct Outcome {
        var path: String
        /// The files read (the main file, unless it is missing and was not named, then the drop-ins).
        var files: [String]
        var parsed: ConfigParseResult
        /// The main file was not there: the built-in defaults (and any drop-ins) are what the daemon loads.
        var defaults: Bool
    }

    static func run(_ given: String?, mode: OutputMode) -> Never {
        let outcome = load(given)
        switch mode {
        case .human: human(outcome)
        case .terse: Screen.out(outcome.parsed.problems.map { Terse.row(finding($0)) }.joined())
        case .json: Output.out(json(outcome) + "\n")
        }
        exit(outcome.parsed.config == nil ? .failed : .ok)
    }

    static func load(_ given: String?) -> Outcome {
        let path = given ?? defaultPath
        let files: [(path: String, text: String)]
        if given == "-" {
            do { files = [(stdinName, String(decoding: try Files.readAny(fd: STDIN_FILENO), as: UTF8.self))] } catch {
                let e = ConfigError(path: stdinName, line: 0, message: "cannot read: \(error)")
                return Outcome(path: stdinName, files: [], parsed: ConfigParseResult(unreadable: e), defaults: false)
            }
        } else {
            do { files = try ConfigFiles.read(path, required: given != nil, streams: true) } catch {
                let e = ConfigError(path: error.path, line: 0, message: "cannot read: \(error.reason)")
                return Outcome(path: path, files: [], parsed: ConfigParseResult(unreadable: e), defaults: false)
            }
        }
        let shown = given == "-" ? stdinName : path
        return Outcome(path: shown, files: files.map(\.path),
                       parsed: Config.parse(files: files, accounts: SystemAccounts()),
                       defaults: given == nil && files.first?.path != path)
    }

    /// Every error and warning in file order on stderr (warnings say "warning:"), then one summary line: on stdout
    /// when the policy is valid, else on stderr.
    static func human(_ o: Outcome) {
        let parsed = o.parsed
        // Each problem is short and escaped already (ConfigError); the file's path is escaped here too.
        for problem in parsed.problems { Screen.err(SafeText.escape("\(problem)") + "\n") }
        let path = SafeText.escape(o.path)
        let unlisted = parsed.errorCount + parsed.warningCount - parsed.problems.count
        if unlisted > 0 { Screen.err("\(path): \(unlisted) more problems not listed\n") }
        let warnings = parsed.warningCount == 0 ? "" : ", " + counted(parsed.warningCount, "warning")
        guard let config = parsed.config else {
            Screen.err("\(path): invalid (\(counted(parsed.errorCount, "error"))\(warnings))\n")
            return
        }
        let missing = o.defaults ? "no such file, so netpermd starts on its built-in defaults; " : ""
        Screen.out("\(path): ok (\(missing)\(counted(o.files.count, "file")), \(counted(config.apps.count, "app")), "
            + "\(counted(config.interfaces.count, "interface override"))\(warnings))\n")
    }

    /// One -t row: file:line:section:severity:message (line and section empty when the problem has none).
    static func finding(_ e: ConfigError) -> [String] {
        let severity: String
        switch e.severity {
        case .error: severity = "error"
        case .warning: severity = "warning"
        }
        return [e.path, e.line > 0 ? String(e.line) : "", e.section ?? "", severity, e.message]
    }

    /// One object: whether the policy is valid, what was read, and every finding as RELOAD and STATUS list them.
    static func json(_ o: Outcome) -> String {
        let b = ByteBuffer(capacity: 1024)
        var w = JSONWriter(b)
        w.field("ok", o.parsed.config != nil)
        w.field("path", o.path)
        w.field("files", strings: o.files)
        w.field("defaults", o.defaults)
        w.field("apps", o.parsed.config?.apps.count)
        w.field("interfaces", o.parsed.config?.interfaces.count)
        w.field("errors", o.parsed.errorCount)
        w.field("warnings", o.parsed.warningCount)
        w.objects("findings", o.parsed.problems) { $1.write(to: &$0) }
        w.close()
        return String(decoding: UnsafeBufferPointer(start: b.base, count: b.count), as: UTF8.self)
    }
}
