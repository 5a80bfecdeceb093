import Glibc
import NetpermCore
import NetpermIO

/// Validates the policy offline, with the same parser the daemon uses.
func check(_ path: String) -> Never {
    do {
        let files = try ConfigFiles.read(path, required: true)
        let config = try Config.parse(files: files, accounts: SystemAccounts())
        Output.out("\(path): ok (\(files.count) file\(files.count == 1 ? "" : "s"), \(config.apps.count) apps, "
            + "\(config.interfaces.count) interface overrides)\n")
        exit(0)
    } catch {
        Output.err("\(error)\n")
        exit(1)
    }
}
