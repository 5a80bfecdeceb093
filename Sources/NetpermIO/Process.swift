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
}
