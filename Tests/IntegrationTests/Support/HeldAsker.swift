// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An app that asks the daemon about itself and stays running, as apps do while they wait for an answer: a prompt
/// is withdrawn once every process that asked has exited, so a one-shot `socat` would take its prompt with it.
/// `argv` is a client that relays its stdin to the socket and the replies to its stdout (socat, or setpriv before
/// it); `close()` (also at teardown) ends it.
final class HeldAsker: @unchecked Sendable {
    let child: ChildProcess
    private var input: Int32?
    let replies: FDLineReader

    init(_ test: IntegrationTestCase, _ argv: [String]) throws {
        let stdin = try Subprocess.makePipe()
        let stdout = try Subprocess.makePipe()
        do {
            child = try Subprocess.spawn(argv, stdin: .fd(stdin.read), stdout: .fd(stdout.write), stderr: .devNull)
        } catch {
            for fd in [stdin.read, stdin.write, stdout.read, stdout.write] { Glibc.close(fd) }
            throw error
        }
        Glibc.close(stdin.read)
        Glibc.close(stdout.write)
        input = stdin.write
        replies = FDLineReader(fd: stdout.read)
        test.addTeardownBlock { [self] in close() }
    }

    /// Sends one request; with `reply`, waits for the next line and returns it parsed.
    @discardableResult
    func ask(_ line: String, reply: Bool = true, timeout: Double = 5) throws -> [String: Any] {
        guard let fd = input else { throw HarnessError("the asker has been closed") }
        try writeText(toFD: fd, line + "\n")
        guard reply else { return [:] }
        guard let l = replies.nextLine(timeout: timeout) else {
            throw HarnessError("no reply to \(line) within \(timeout) s (eof \(replies.eof))")
        }
        return try JSONValue.object(l)
    }

    var pid: pid_t { child.pid }

    /// Ends the process (its input first, then a kill), reaped; safe to call twice.
    func close() {
        guard !closed else { return }
        closed = true
        if let fd = input { Glibc.close(fd) }
        input = nil
        _ = child.killAndReap()
        Glibc.close(replies.fd)
    }

    private var closed = false
}
