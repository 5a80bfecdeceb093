// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// Signal masks.
public enum Signals {
    /// Blocks `signo` for the calling thread: it stays pending until a signalfd (the loop) takes it.
    public static func block(_ signo: Int32) throws(Errno) {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signo)
        _ = try sys { sigprocmask(SIG_BLOCK, &set, nil) }
    }

    /// Blocks `signals` and returns a descriptor that becomes readable when one is pending (signalfd): for a
    /// program with a poll loop of its own (`netpermctl agent`), to clean up before it goes.
    public static func descriptor(_ signals: [Int32]) throws(Errno) -> Int32 {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        _ = try sys { sigprocmask(SIG_BLOCK, &set, nil) }
        return try sys { signalfd(-1, &set, NP_SFD_CLOEXEC) }
    }
}

/// Resource limits.
public enum Limits {
    /// Every client is a descriptor: take the hard limit of open files (systemd's default soft limit is 1024).
    public static func raiseOpenFilesToHardLimit() throws(Errno) {
        var nofile = rlimit()
        _ = try sys { getrlimit(Int32(RLIMIT_NOFILE.rawValue), &nofile) }
        guard nofile.rlim_cur < nofile.rlim_max else { return }
        nofile.rlim_cur = nofile.rlim_max
        _ = try sys { setrlimit(Int32(RLIMIT_NOFILE.rawValue), &nofile) }
    }

    /// The soft limit of open files (descriptors numbered from 0 up to it), nil if it cannot be read.
    public static func openFiles() -> Int? {
        var nofile = rlimit()
        guard (try? sys { getrlimit(Int32(RLIMIT_NOFILE.rawValue), &nofile) }) != nil else { return nil }
        return nofile.rlim_cur >= rlim_t(Int.max) ? Int.max : Int(nofile.rlim_cur)
    }
}

extension Signals {
    /// SIG_IGN: a client gone mid-reply must cost an EPIPE, not the daemon.
    public static func ignore(_ signo: Int32) {
        Glibc.signal(signo, SIG_IGN)
    }
}

/// Running another program in place of this one.
public enum Exec {
    /// execvp(3): returns only when it failed, with why.
    public static func replace(with argv: [String]) -> Errno {
        var cargs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cargs.append(nil)
        do { _ = try sys { execvp(argv[0], &cargs) } } catch { return error }
        return Errno(ENOEXEC)
    }
}
