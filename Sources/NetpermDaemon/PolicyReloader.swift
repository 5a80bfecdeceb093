// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermHost
import NetpermIO
import NetpermPolicyFiles

/// Reloads the policy when its files change (inotify on the config's directory and the drop-in directory,
/// debounced so an editor's write-rename-chmod burst is one reload) or on demand (SIGHUP).
public final class PolicyReloader {
    static let debounceMicroseconds: UInt64 = 200_000

    private let loop: EventLoop
    private let configDir: String
    private let configName: String
    private let dropInDir: String
    private let reload: () -> Void
    private var dirWatch: TimerSource?
    private var dropInWatch: TimerSource?
    private var timer: TimerSource?

    public init(loop: EventLoop, configPath: String, reload: @escaping () -> Void) {
        self.loop = loop
        configDir = Files.directory(of: configPath)
        configName = Files.name(of: configPath)
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

    public func reloadNow() {
        timer?.cancel()
        timer = nil
        // The drop-in directory may have appeared or been replaced since the last look.
        armDropInWatch()
        reload()
    }
}
