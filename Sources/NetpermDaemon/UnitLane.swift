// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO
import NetpermNftables

/// Carries out `Effect.loadUnitElements`: the elements of units just made (or gone), by cgroup id, sent as
/// nf_tables batches on a thread and a socket of their own, so that no load of the rules (a scan's thousands of
/// elements through libnftables, a whole table) holds them up (docs/ENFORCEMENT.md, "The first moments of a new
/// cgroup"). Changes asked for while a batch is in flight go together next, in their order; a change that deletes
/// (a unit gone) never shares a batch with another, so that a deletion the kernel refuses takes no addition with it.
final class UnitLane {
    private struct Job {
        var changes: ElementChanges
        var done: (EdgeError?) -> Void
        var deletes: Bool {
            changes.commands.contains { c in
                switch c {
                case .delete, .flush, .deleteChain: return true
                case .add: return false
                }
            }
        }
    }

    /// What runs on the thread: the batches, and the first refusal.
    final class Send: @unchecked Sendable {
        let batches: [ElementChanges]
        var socket: NetlinkSocket?
        var failure: EdgeError?
        init(batches: [ElementChanges], socket: NetlinkSocket?) { self.batches = batches; self.socket = socket }

        func execute() {
            do throws(Errno) {
                if socket == nil { socket = try NftablesElements.socket() }
            } catch {
                failure = EdgeError(.loadUnitElements, errno: error.code, "cannot open a netfilter socket: \(error)")
                return
            }
            for b in batches {
                switch NftablesElements.run(b, on: socket!, for: .loadUnitElements) {
                case .committed: continue
                case let .refused(refused): failure = refused
                case .tooLarge: failure = EdgeError(.loadUnitElements, "a batch too large")
                }
                return
            }
        }
    }

    /// Elements per batch: each is one datagram (`NftablesElements.maxElements`, `maxBatchBytes`).
    static let batchElements = 200

    private let loop: EventLoop
    private let thread: Worker<Send>
    private var queue: [Job] = []
    private var running = false
    private var socket: NetlinkSocket?
    /// Batches begun and finished: commits the daemon's own, which the event socket's generation check must not
    /// take for another process's.
    private(set) var started: UInt32 = 0
    private(set) var finished: UInt32 = 0
    /// The port of the lane's socket, once made: its notifications are the daemon's own.
    var portOpened: (UInt32) -> Void = { _ in }

    init(loop: EventLoop) {
        self.loop = loop
        thread = Worker(loop: loop, doing: "naming new units")
    }

    func load(_ changes: ElementChanges, done: @escaping (EdgeError?) -> Void) {
        queue.append(Job(changes: changes, done: done))
        startNext()
    }

    private func startNext() {
        guard !running, !queue.isEmpty else { return }
        // The first job, and those after it of the same kind when it only adds.
        var jobs = [queue.removeFirst()]
        if !jobs[0].deletes {
            while let next = queue.first, !next.deletes { jobs.append(queue.removeFirst()) }
        }
        let batches = Self.batches(jobs.flatMap(\.changes.commands))
        // Made here, before its first commit: the event socket must know its port before it hears of one.
        if socket == nil, let opened = try? NftablesElements.socket() {
            socket = opened
            portOpened(opened.port)
        }
        let send = Send(batches: batches, socket: socket)
        socket = nil
        running = true
        started &+= UInt32(batches.count)
        let finish: (Send) -> Void = { [unowned self] s in
            running = false
            finished &+= UInt32(batches.count)
            socket = s.socket
            for j in jobs { j.done(s.failure) }
            startNext()
        }
        thread.run({ send.execute(); return send }, then: finish)
    }

    /// `commands` cut into batches of at most `batchElements` elements, in order.
    static func batches(_ commands: [ElementChanges.Command]) -> [ElementChanges] {
        var out: [ElementChanges] = [], current: [ElementChanges.Command] = [], count = 0
        func flush() {
            if !current.isEmpty { out.append(ElementChanges(commands: current)) }
            current = []
            count = 0
        }
        /// `items` of one map, as many commands as the batches they fall in.
        func spread<T>(_ items: [T], _ command: ([T]) -> ElementChanges.Command) {
            var at = 0
            while at < items.count {
                if count == batchElements { flush() }
                let part = Array(items[at..<min(items.count, at + batchElements - count)])
                current.append(command(part))
                count += part.count
                at += part.count
            }
        }
        for c in commands {
            switch c {
            case let .add(map, elements): spread(elements) { .add(map: map, elements: $0) }
            case let .delete(map, keys): spread(keys) { .delete(map: map, keys: $0) }
            case .flush, .deleteChain:
                if count == batchElements { flush() }
                current.append(c)
                count += 1
            }
        }
        flush()
        return out
    }
}
