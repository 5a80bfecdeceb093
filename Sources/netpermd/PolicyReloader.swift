import NetpermIO
import NetpermSystemd

/// Reloads the policy when its files change (inotify on the config's directory and the drop-in directory,
/// debounced so an editor's write-rename-chmod burst is one reload) or on demand (SIGHUP).
final class PolicyReloader {
    static let debounceMicroseconds: UInt64 = 200_000

    private let loop: SDEventLoop
    private let configDir: String
    private let configName: String
    private let dropInDir: String
    private let reload: () -> Void
    private var dirWatch: PathWatch?
    private var dropInWatch: PathWatch?
    private var timer: TimerSource?

    init(loop: SDEventLoop, configPath: String, reload: @escaping () -> Void) {
        self.loop = loop
        let slash = configPath.lastIndex(of: "/")
        configDir = slash.map { String(configPath[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        configName = slash.map { String(configPath[configPath.index(after: $0)...]) } ?? configPath
        dropInDir = ConfigFiles.dropInDirectory(for: configPath)
        self.reload = reload
        dirWatch = try? loop.watch(directory: configDir) { [unowned self] name in
            // Only the config file and its drop-in directory matter in a shared directory like /etc.
            if name == self.configName || name == self.configName + ".d" { self.changed() }
        }
        if dirWatch == nil { Log.info("\(configDir) cannot be watched; reload with SIGHUP") }
        armDropInWatch()
    }

    private func armDropInWatch() {
        dropInWatch = try? loop.watch(directory: dropInDir) { [unowned self] name in
            if name == nil || name!.hasSuffix(".conf") { self.changed() }
        }
    }

    private func changed() {
        timer?.cancel()
        timer = try? loop.addTimer(afterMicroseconds: Self.debounceMicroseconds) { [unowned self] in
            Log.info("configuration changed on disk: reloading policy")
            self.reloadNow()
        }
    }

    func reloadNow() {
        timer?.cancel()
        timer = nil
        // The drop-in directory may have appeared or been replaced since the last look.
        armDropInWatch()
        reload()
    }
}
