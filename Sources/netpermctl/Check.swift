import Glibc
import NetpermCore
import NetpermHost
import NetpermIO

/// Validates the policy offline, with the same parser the daemon uses: every error and warning in file order
/// on stderr (warnings say "warning:"), then one summary line. Exit 1 on any error; warnings alone pass.
func check(_ path: String) -> Never {
    func count(_ n: Int, _ what: String) -> String { "\(n) \(what)\(n == 1 ? "" : "s")" }
    let files: [(path: String, text: String)]
    do { files = try ConfigFiles.read(path, required: true) } catch {
        Screen.err(SafeText.escape("\(error)") + "\n")
        exit(1)
    }
    let parsed = Config.parse(files: files, accounts: SystemAccounts())
    // Each problem is short and escaped already (ConfigError); the file's path is escaped here too.
    for problem in parsed.problems { Screen.err(SafeText.escape("\(problem)") + "\n") }
    let path = SafeText.escape(path)
    let unlisted = parsed.errorCount + parsed.warningCount - parsed.problems.count
    if unlisted > 0 { Screen.err("\(path): \(unlisted) more problems not listed\n") }
    let warnings = parsed.warningCount == 0 ? "" : ", " + count(parsed.warningCount, "warning")
    guard let config = parsed.config else {
        Screen.err("\(path): invalid (\(count(parsed.errorCount, "error"))\(warnings))\n")
        exit(1)
    }
    Screen.out("\(path): ok (\(count(files.count, "file")), \(config.apps.count) apps, "
        + "\(config.interfaces.count) interface overrides\(warnings))\n")
    exit(0)
}
