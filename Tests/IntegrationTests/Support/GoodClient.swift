// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A well-behaved client: one connection, `QUERY APP` every 5 ms, each round trip timed (AbuseTests, SoakTests
/// bound its p99 while others attack the daemon).
final class GoodClient: @unchecked Sendable {
    let socket: String
    let app: String
    private let lock = NSLock()
    private var running = false
    private var times: [Double] = []
    private var errors: [String] = []
    private var started = false
    private var finished = false

    init(socket: String, app: String) { self.socket = socket; self.app = app }

    var latencies: [Double] { lock.lock(); defer { lock.unlock() }; return times }
    var failures: [String] { lock.lock(); defer { lock.unlock() }; return errors }

    func start() throws {
        let ch = try EvChannel.connect(socket, name: "good client")
        lock.lock(); running = true; started = true; lock.unlock()
        Thread { [self] in
            while true {
                lock.lock(); let go = running; lock.unlock()
                guard go else { break }
                let t = monotonicNow()
                do {
                    let r = try ch.request("QUERY \(app)", timeout: 5)
                    let took = monotonicNow() - t
                    lock.lock()
                    times.append(took)
                    if r["app"] as? String != app { errors.append("\(r)") }
                    lock.unlock()
                } catch {
                    lock.lock(); errors.append("\(error)"); lock.unlock()
                    break
                }
                usleep(5000)
            }
            ch.close()
            lock.lock(); finished = true; lock.unlock()
        }.start()
    }

    func stop() {
        lock.lock(); running = false; let was = started; lock.unlock()
        guard was else { return }
        for _ in 0..<600 {
            lock.lock(); let done = finished; lock.unlock()
            if done { return }
            usleep(10_000)
        }
    }
}
