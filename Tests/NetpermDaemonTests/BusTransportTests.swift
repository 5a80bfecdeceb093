// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermCore
import NetpermDaemon
import NetpermProtocol
import XCTest

/// The bus face's transport where it meets the engine (`Interpreter.busRequest`): the same process's QUERY over the
/// socket and over the bus gets the same verdict, member for member. BusFaceTests compares them through the real bus
/// for every reason a running daemon gives; `starting` is the engine's before its `started` input, which the daemon
/// feeds before its loop serves anyone (no caller of either transport ever sees it), so it is compared here, where
/// the bed can hold the start.
final class BusTransportTests: XCTestCase {
    /// The bus face's side of the interpreter, keeping each call's reply.
    final class Replies: SecondTransport {
        var replies: [UInt64: String] = [:]
        func owns(_ id: UInt64) -> Bool { id >= 1 << 48 }
        func reply(_ id: UInt64, _ bytes: UnsafeRawBufferPointer) { replies[id] = String(decoding: bytes, as: UTF8.self) }
        func event(_ id: UInt64, head: UnsafeRawBufferPointer, tail: UnsafeRawBufferPointer) {}
        func flush() {}
    }

    /// QUERY from this process on the socket and as a bus call (its own app, as `Query` asks), parsed.
    private func both(_ b: DaemonBed, _ bus: Replies, fd: Int32, id: UInt64) throws -> (socket: JSON, bus: JSON) {
        let socket = try b.request(fd, "QUERY")
        b.interpreter.busRequest(id, caller: b.interpreter.identifyBusCaller(pid: getpid(), uid: geteuid()),
                                 via: .bus(authorized: false), line: "QUERY")
        XCTAssertTrue(b.loop.run(until: { bus.replies[id] != nil }), "the bus call was answered")
        b.interpreter.busClosed(id)
        return (socket, try JSONParser.parse(bus.replies[id] ?? ""))
    }

    func testBeforeTheStartBothTransportsSayStarting() throws {
        let b = try DaemonBed(started: false)
        addTeardownBlock { b.close() }
        let bus = Replies()
        b.interpreter.bus = bus
        let fd = try b.connect()
        let before = try both(b, bus, fd: fd, id: 1 << 48)
        XCTAssertEqual(before.socket["reason"], "starting", before.socket.encoded())
        XCTAssertEqual(before.socket, before.bus)
        b.interpreter.feed(.started)
        let after = try both(b, bus, fd: fd, id: (1 << 48) + 1)
        XCTAssertNotEqual(after.socket["reason"], "starting", after.socket.encoded())
        XCTAssertEqual(after.socket, after.bus)
    }
}
