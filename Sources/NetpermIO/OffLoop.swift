// SPDX-License-Identifier: LGPL-2.1-or-later
import CLinux
import Glibc

/// Runs one job at a time on a thread of its own and hands its result back on the event loop's thread: for
/// work that can take long (reading and parsing a policy of many megabytes) while clients must still be
/// answered. The thread is started per job (jobs are rare: a reload); the result crosses back through an
/// eventfd the loop watches, so no lock is shared with the loop.
public final class OffLoop<Result: Sendable> {
    private let fd: Int32
    private var source: IOSource?
    private var done: ((Result) -> Void)?
    private var job: Job<Result>?
    /// The nice value its threads run at (0: the process's).
    private let niceness: Int32

    /// `background`: its threads run at nice `Self.backgroundNiceness`, yielding the CPU to the loop and to other
    /// threads (bulk work, such as scanning thousands of cgroups, while units just made must be named).
    public init(loop: EventLoop, background: Bool = false) throws(Errno) {
        let fd = try EventFD.make()
        self.fd = fd
        niceness = background ? Self.backgroundNiceness : 0
        source = try loop.addIO(fd: fd, events: IOEvents.readable) { [unowned self] _ in self.finished() }
    }

    deinit {
        source?.cancel()
        FD.close(fd)
    }

    public var busy: Bool { job != nil }

    /// Starts `work` on its own thread; `then` runs on the loop's thread with its result. One job at a time.
    public func run(_ work: @escaping @Sendable () -> Result, then: @escaping (Result) -> Void) throws(Errno) {
        precondition(job == nil, "one job at a time")
        let nice = niceness
        let j = Job(work: nice == 0 ? work : { OffLoop.setNiceness(nice); return work() }, fd: fd)
        let r = startThread(Unmanaged.passRetained(j as ThreadJob).toOpaque())
        guard r == 0 else { throw Errno(r) }
        job = j
        done = then
    }

    public static var backgroundNiceness: Int32 { 10 }

    /// The calling thread's nice value (Linux's is per thread); unprivileged, it can only be raised.
    static func setNiceness(_ n: Int32) {
        _ = try? sys { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(np_gettid()), n) }
    }

    private func finished() {
        var count: UInt64 = 0
        guard (try? sysNonBlocking { read(fd, &count, 8) }) != nil, let j = job, let result = j.result else { return }
        let then = done
        job = nil
        done = nil
        then?(result)
    }
}

/// What a job's thread runs; not generic, so the thread's entry point can be a C function.
class ThreadJob: @unchecked Sendable {
    func execute() {}
}

/// The thread owns the job until it writes the eventfd; the loop reads `result` only after reading it.
private final class Job<Result: Sendable>: ThreadJob, @unchecked Sendable {
    let work: @Sendable () -> Result
    let fd: Int32
    var result: Result?

    init(work: @escaping @Sendable () -> Result, fd: Int32) {
        self.work = work
        self.fd = fd
    }

    override func execute() {
        result = work()
        EventFD.signal(fd)
    }
}

/// Starts a detached thread running the job `context` holds (retained; the thread releases it).
private func startThread(_ context: UnsafeMutableRawPointer) -> Int32 {
    var thread = pthread_t()
    let r = pthread_create(&thread, nil, { context in
        let job = Unmanaged<ThreadJob>.fromOpaque(context!).takeRetainedValue()
        job.execute()
        return nil
    }, context)
    if r == 0 {
        pthread_detach(thread)
    } else {
        Unmanaged<ThreadJob>.fromOpaque(context).release()
    }
    return r
}
