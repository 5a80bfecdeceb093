// SPDX-License-Identifier: LGPL-2.1-or-later
/// What carries out the engine's effects: the daemon's interpreter, the engine tests' harness, the fuzz target.
public protocol EngineEdges: AnyObject {
    /// Carries out the effects of one input, in order. An input an effect produces (a store's result, a policy
    /// read, a connection closed) goes to `EngineDriver.feed`, which handles it after these effects, never inside
    /// them.
    func carryOut(_ effects: Effects, of input: Input)
    /// Every queued input has been handled: what was held back meanwhile (requests of a client released from a
    /// hold) may be fed now, one at a time.
    func drained()
}

/// The one loop that drives the engine, for the daemon and its tests alike: inputs are queued, and each is handled
/// and its effects carried out before the next is taken.
public final class EngineDriver {
    public let engine: Engine
    /// The effects of the input being carried out (reset for each input).
    public let effects = Effects()
    public weak var edges: EngineEdges?
    private var queue: [Input] = []
    private var next = 0
    public private(set) var draining = false

    public init(engine: Engine) {
        self.engine = engine
    }

    /// Handles `input` and everything it leads to, then tells the edges the queue is empty. Fed while the
    /// driver drains (from an effect), it only queues.
    public func feed(_ input: Input) {
        guard !draining else {
            queue.append(input)
            return
        }
        draining = true
        // The first input is handled as given: the queue is empty then, and passing through it copied each request
        // in and out of it (~800 instructions a QUERY).
        handle(input)
        while next < queue.count {
            let queued = queue[next]
            next += 1
            handle(queued)
        }
        if !queue.isEmpty { queue.removeAll(keepingCapacity: true) }
        next = 0
        draining = false
        edges?.drained()
    }

    private func handle(_ input: Input) {
        effects.reset()
        engine.handle(input, into: effects)
        edges?.carryOut(effects, of: input)
    }
}
