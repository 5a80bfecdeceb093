// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermSystemd

/// Makes the scopes the engine asks for apps found by what they run (Effect.makeScope): StartTransientUnit with
/// `PIDs=[pid]` on the user's own manager (TransientScope), each on a thread of its own (a call waits for the start
/// job, up to `timeout` seconds), at most `threads` at once; the engine asks for no more than that
/// (Engine.maxScopes), and a request that finds every thread busy waits in a queue of its own.
public final class ScopeMaker {
    private var workers: [OffLoop<EdgeError?>] = []
    private var waiting: [(ScopeRequest, (EdgeError?) -> Void)] = []
    private let timeout: Double

    public init(loop: EventLoop, threads: Int = Engine.maxScopesPublic, timeout: Double = 5) {
        self.timeout = timeout
        for _ in 0..<threads {
            if let w = try? OffLoop<EdgeError?>(loop: loop) { workers.append(w) }
        }
        if workers.isEmpty { Log.warning("cannot set up making apps' scopes off the loop; apps found by what they run keep their place") }
    }

    public func make(_ request: ScopeRequest, done: @escaping (EdgeError?) -> Void) {
        guard let worker = workers.first(where: { !$0.busy }) else {
            guard !workers.isEmpty else { return done(EdgeError(.makeScope, "no thread to make scopes on")) }
            waiting.append((request, done))
            return
        }
        let timeout = self.timeout
        do {
            try worker.run({
                do {
                    try TransientScope.start(name: request.unit, pids: [UInt32(bitPattern: request.pid)],
                                             description: "\(request.app), found by what it runs (netpermd)",
                                             slice: "app.slice", ofUser: request.uid, timeout: timeout)
                    return nil
                } catch {
                    return EdgeError(.makeScope, "\(error)")
                }
            }) { [unowned self] error in
                done(error)
                if !self.waiting.isEmpty {
                    let (r, d) = self.waiting.removeFirst()
                    self.make(r, done: d)
                }
            }
        } catch {
            done(EdgeError(.makeScope, errno: error.code, "cannot start a thread: \(error)"))
        }
    }
}
