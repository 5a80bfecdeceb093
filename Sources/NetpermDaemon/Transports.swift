// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermControl
import NetpermCore

/// Where the engine's replies and events go: the control socket (`ControlServer`), or the system bus's face for the
/// connections it opened (`SecondTransport`). A bus call's connection carries one request: nothing to hold or keep,
/// and it closes with its reply.
final class Transports {
    /// The socket, set once it exists (it needs the interpreter as its delegate).
    var server: ControlServer?
    var bus: SecondTransport?
    /// The bodies of the events in the effects being carried out, by where they are in them: one event's body is
    /// written once and held once, however many subscribers it goes to (forgotten after each input's effects).
    private var bodies: [Range<Int>: EventBody] = [:]

    func reply(_ id: ConnectionID, _ bytes: UnsafeRawBufferPointer) {
        if let bus, bus.owns(id) { bus.reply(id, bytes) } else { server?.reply(id, bytes) }
    }

    func event(_ id: ConnectionID, head: UnsafeRawBufferPointer, tail: Range<Int>, in effects: Effects) {
        if let bus, bus.owns(id) { return bus.event(id, head: head, tail: effects[tail]) }
        guard let server else { return }
        let body = bodies[tail] ?? server.body(effects[tail])
        bodies[tail] = body
        server.event(id, head: head, body: body)
    }

    /// Its connection is the socket's (not the bus's).
    func socket(_ id: ConnectionID) -> ControlServer? { bus?.owns(id) == true ? nil : server }

    /// The input's effects are carried out.
    func carriedOut() { bodies.removeAll(keepingCapacity: true) }

    /// The engine has nothing more to handle: clients released from a hold are served, the bus's signals sent.
    func drained() {
        server?.serveReleased()
        bus?.flush()
    }
}
