// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A test-harness failure with a message meant for a human reading the test log.
struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Seconds on CLOCK_MONOTONIC.
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The result of a finished command.
struct CommandResult {
    var argv: [String]
    /// The exit code, or 128 + signal number when the command was killed by a signal.
    var status: Int32
    var stdoutBytes: [UInt8]
    var stderrBytes: [UInt8]
    var stdout: String { String(decoding: stdoutBytes, as: UTF8.self) }
    var stderr: String { String(decoding: stderrBytes, as: UTF8.self) }

    var summary: String {
        "`\(argv.joined(separator: " "))` exited \(status)\n--- stdout ---\n\(stdout.suffix(4000))\n--- stderr ---\n\(stderr.suffix(4000))"
    }

    /// stdout split into lines (the trailing newline does not make an empty last line).
    var lines: [String] {
        var l = stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if l.last == "" { l.removeLast() }
        return l
    }
}

/// Spawning and reaping child processes with posix_spawn: every wait is bounded, nothing leaks descriptors.
enum Subprocess {
    /// Where to look for tools when PATH does not list sbin directories.
    static func resolve(_ tool: String) -> String {
        if tool.contains("/") { return tool }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for dir in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
            let candidate = "\(dir)/\(tool)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return tool
    }

    enum Redirect {
        case fd(Int32)
        case devNull
        /// Opened for appending (created 0644).
        case appendFile(String)
    }

    /// Starts `argv` with the given standard descriptors. Signals are reset to their defaults in the child
    /// (the test process ignores SIGPIPE, and an ignored signal would stay ignored across exec).
    /// `ownGroup`: in a process group of its own, which `killAndReap` kills whole: a server that forks a child per
    /// connection (`socat ... fork`) leaves none behind.
    static func spawn(_ argv: [String], stdin: Redirect, stdout: Redirect, stderr: Redirect,
                      ownGroup: Bool = false) throws -> ChildProcess {
        precondition(!argv.isEmpty)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, redirect) in [(Int32(0), stdin), (1, stdout), (2, stderr)] {
            switch redirect {
            case let .fd(fd): posix_spawn_file_actions_adddup2(&actions, fd, target)
            case .devNull:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case let .appendFile(path):
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            }
        }
        // The test runner has descriptors without FD_CLOEXEC (its own socketpairs); children get 0-2 only.
        // (After the dup2s, which may read from them. glibc ignores EBADF from a close action.)
        for fd in openDescriptors() where fd > 2 {
            posix_spawn_file_actions_addclose(&actions, fd)
        }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attr, &all)
        posix_spawnattr_setsigmask(&attr, &none)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK
                                                    | (ownGroup ? POSIX_SPAWN_SETPGROUP : 0)))
        posix_spawnattr_setpgroup(&attr, 0)

        let path = resolve(argv[0])
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cArgs.append(nil)
        defer { for p in cArgs { free(p) } }
        var pid: pid_t = 0
        var cEnv: [UnsafeMutablePointer<CChar>?] = childEnvironment().map { strdup($0) }
        cEnv.append(nil)
        defer { for p in cEnv { free(p) } }
        let r = posix_spawn(&pid, path, &actions, &attr, cArgs, cEnv)
        guard r == 0 else {
            throw HarnessError("cannot start \(path): \(String(cString: strerror(r)))")
        }
        return ChildProcess(pid: pid, argv: argv, ownGroup: ownGroup)
    }

    /// Our environment without what would make a child talk to a service manager (the test runner may run
    /// under systemd) or to another daemon: sd_notify, socket activation and netpermctl's default socket.
    static func childEnvironment() -> [String] {
        let drop: Set<String> = ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC",
                                 "WATCHDOG_PID", "NETPERMD_SOCKET"]
        return ProcessInfo.processInfo.environment.filter { !drop.contains($0.key) }.map { "\($0.key)=\($0.value)" }
    }

    /// This process's open descriptors, from /proc/self/fd.
    static func openDescriptors() -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap { Int32($0) }
    }

    static func decode(_ st: Int32) -> Int32 {
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import.
        let sig = st & 0x7f
        return sig == 0 ? (st >> 8) & 0xff : 128 + sig
    }

    static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        // pipe2 is not imported; the tests spawn from one thread, so setting FD_CLOEXEC right after is enough.
        guard pipe(&fds) == 0 else { throw HarnessError("pipe: \(String(cString: strerror(errno)))") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    static func setNonBlocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// Runs `argv` to completion, feeding `input` on stdin and collecting stdout and stderr.
    /// With `keepInputOpen`, stdin stays open after `input` until the command ends by itself (so it cannot
    /// have ended because its input did). Throws if it takes longer than `timeout` seconds.
    static func run(_ argv: [String], input: [UInt8] = [], keepInputOpen: Bool = false,
                    timeout: Double = 10) throws -> CommandResult {
        let inPipe = try makePipe()
        let outPipe = try makePipe()
        let errPipe = try makePipe()
        let child: ChildProcess
        do {
            child = try spawn(argv, stdin: .fd(inPipe.read), stdout: .fd(outPipe.write), stderr: .fd(errPipe.write))
        } catch {
            for fd in [inPipe.read, inPipe.write, outPipe.read, outPipe.write, errPipe.read, errPipe.write] { close(fd) }
            throw error
        }
        close(inPipe.read); close(outPipe.write); close(errPipe.write)
        var stdinFD: Int32? = inPipe.write
        setNonBlocking(inPipe.write); setNonBlocking(outPipe.read); setNonBlocking(errPipe.read)
        var out: [UInt8] = [], err: [UInt8] = []
        var outOpen = true, errOpen = true
        var written = 0
        let deadline = monotonicNow() + timeout
        defer {
            if let fd = stdinFD { close(fd) }
            close(outPipe.read); close(errPipe.read)
        }
        var buf = [UInt8](repeating: 0, count: 65536)

        func drain(_ fd: Int32, into sink: inout [UInt8], open: inout Bool) {
            while open {
                let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n > 0 { sink.append(contentsOf: buf[0..<n]); continue }
                if n == 0 { open = false; return }
                if errno == EINTR { continue }
                if errno != EAGAIN { open = false }
                return
            }
        }

        while outOpen || errOpen {
            if let fd = stdinFD, written >= input.count, !keepInputOpen {
                close(fd); stdinFD = nil
            }
            var pfds: [pollfd] = []
            if outOpen { pfds.append(pollfd(fd: outPipe.read, events: Int16(POLLIN), revents: 0)) }
            if errOpen { pfds.append(pollfd(fd: errPipe.read, events: Int16(POLLIN), revents: 0)) }
            if let fd = stdinFD, written < input.count { pfds.append(pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)) }
            let remaining = deadline - monotonicNow()
            if remaining <= 0 {
                let status = child.killAndReap()
                throw HarnessError("`\(argv.joined(separator: " "))` did not finish within \(timeout) s (killed, status "
                    + "\(status.map(String.init) ?? "?"))\n--- stdout ---\n\(String(decoding: out.suffix(4000), as: UTF8.self))"
                    + "\n--- stderr ---\n\(String(decoding: err.suffix(4000), as: UTF8.self))")
            }
            _ = poll(&pfds, nfds_t(pfds.count), Int32(min(remaining * 1000 + 1, 1000)))
            drain(outPipe.read, into: &out, open: &outOpen)
            drain(errPipe.read, into: &err, open: &errOpen)
            if let fd = stdinFD, written < input.count {
                let n = input.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
                if n > 0 {
                    written += n
                } else if n < 0 && errno != EAGAIN && errno != EINTR {
                    // EPIPE: the command stopped reading; what it did not take is its business.
                    written = input.count
                    if !keepInputOpen { close(fd); stdinFD = nil }
                }
            }
        }
        if let fd = stdinFD { close(fd); stdinFD = nil }
        guard let status = child.wait(timeout: max(deadline - monotonicNow(), 0.5)) else {
            let status = child.killAndReap()
            throw HarnessError("`\(argv.joined(separator: " "))` closed its output but did not exit within \(timeout) s "
                + "(killed, status \(status.map(String.init) ?? "?"))")
        }
        return CommandResult(argv: argv, status: status, stdoutBytes: out, stderrBytes: err)
    }

    /// Runs `argv` and throws unless it exits 0.
    @discardableResult
    static func check(_ argv: [String], input: [UInt8] = [], timeout: Double = 10) throws -> CommandResult {
        let r = try run(argv, input: input, timeout: timeout)
        guard r.status == 0 else { throw HarnessError("command failed: \(r.summary)") }
        return r
    }
}

/// A child we started. Reaped exactly once; its status is remembered, so no later wait or kill can hit a pid
/// the kernel has given to someone else.
final class ChildProcess: @unchecked Sendable {
    let pid: pid_t
    let argv: [String]
    /// Leads a process group of its own (its pid is the group's id).
    let ownGroup: Bool
    private(set) var exitStatus: Int32?

    init(pid: pid_t, argv: [String], ownGroup: Bool = false) { self.pid = pid; self.argv = argv; self.ownGroup = ownGroup }

    /// The status (exit code, or 128 + signal) if it has exited, reaping it; nil while it runs.
    @discardableResult
    func poll() -> Int32? {
        if exitStatus != nil { return exitStatus }
        var st: Int32 = 0
        let r = waitpid(pid, &st, WNOHANG)
        if r == pid {
            exitStatus = Subprocess.decode(st)
        } else if r < 0 && errno == ECHILD {
            exitStatus = -1   // not ours to wait for (cannot happen unless someone else reaped it)
        }
        return exitStatus
    }

    var isRunning: Bool { poll() == nil }

    /// Bounded wait: polls every millisecond until `timeout`; nil if it is still running.
    func wait(timeout: Double) -> Int32? {
        let deadline = monotonicNow() + timeout
        while true {
            if let s = poll() { return s }
            if monotonicNow() >= deadline { return nil }
            usleep(1000)
        }
    }

    func signal(_ sig: Int32) {
        if isRunning { kill(pid, sig) }
    }

    /// SIGKILL (if still running) and reap; bounded, as SIGKILL cannot be blocked. A group leader's whole group is
    /// killed first, while the leader is unreaped: its pid, the group's id, cannot have been given to anyone else.
    @discardableResult
    func killAndReap() -> Int32? {
        if ownGroup && exitStatus == nil { kill(-pid, SIGKILL) }
        signal(SIGKILL)
        return wait(timeout: 10)
    }
}
