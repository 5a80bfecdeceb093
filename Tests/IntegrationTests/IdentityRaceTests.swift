// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A request is answered for the process that sent it, not for whatever the process that connected has become.
/// The race of issue 14: a process connects, forks (the child keeps the socket), and the parent execs another
/// program; the child's QUERY was answered as that program's app in 11 of 40 tries, because the peer was
/// identified once, at accept, from the connector's pid.
final class IdentityRaceTests: IntegrationTestCase {
    /// Connects, forks, and execs OTHER in the parent; the child waits until the exec has happened (the write end
    /// of a close-on-exec pipe closes at it), sends QUERY on the socket it inherited and prints "PID REPLY". OTHER
    /// (a copy of cat) reads a pipe whose only writer is the child, so it lives until the child is done.
    static let script = """
        import os, socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sys.argv[1])
        execd_r, execd_w = os.pipe()
        hold_r, hold_w = os.pipe()
        if os.fork() == 0:
            os.close(execd_w)
            os.close(hold_r)
            os.read(execd_r, 1)
            s.sendall(b"QUERY\\n")
            reply = b""
            while not reply.endswith(b"\\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
            sys.stdout.write("%d %s" % (os.getpid(), reply.decode()))
            sys.stdout.flush()
            os._exit(0)
        os.close(execd_r)
        os.close(hold_w)
        os.dup2(hold_r, 0)
        os.dup2(os.open("/dev/null", os.O_WRONLY), 1)
        os.execv(sys.argv[2], [sys.argv[2]])
        """

    func testForkThenExecAnswersTheChildForItsOwnExecutable() throws {
        // The interpreter itself, not a wrapper script in front of it (pyenv's shims are).
        let python = try Subprocess.check([Subprocess.python, "-c", "import os; print(os.readlink('/proc/self/exe'))"])
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let other = dir + "/other"
        try FileManager.default.copyItem(atPath: Subprocess.resolve("cat"), toPath: other)
        chmod(other, 0o755)
        let config = try writeConfig("""
            [App snake]
            Executable=\(python)

            [App other]
            Executable=\(other)

            """, in: dir)
        let socket = dir + "/netpermd.sock"
        _ = try startDaemon(in: ns, socket: socket, config: config)

        let tries = 40
        var wrong: [String] = []
        var asOther = 0
        for i in 0..<tries {
            let r = try Subprocess.run([Subprocess.python, "-c", Self.script, socket, other], timeout: 10)
            guard r.status == 0, let line = r.lines.first, let space = line.firstIndex(of: " "),
                  let pid = Int(line[..<space]) else {
                XCTFail("try \(i): \(r.summary)")
                continue
            }
            let reply = try JSONValue.object(String(line[line.index(after: space)...]))
            let identity = reply["identity"] as? [String: Any] ?? [:]
            if reply["app"] as? String != "snake" || identity["pid"] as? Int != pid
                || identity["executable"] as? String != python {
                wrong.append("try \(i): the child (pid \(pid), \(python)) was answered as \(line)")
                if reply["app"] as? String == "other" { asOther += 1 }
            }
        }
        XCTAssertEqual(wrong.count, 0, "\(wrong.count) of \(tries) tries answered for another process, \(asOther) of them "
            + "as the program the parent became:\n" + wrong.prefix(5).joined(separator: "\n"))
    }

    /// /proc/PID/exe is a path in the process's own mount namespace. A process that binds another program over a
    /// policy's Executable= path in a mount namespace of its own (unshare -Urm needs no privilege here) and runs it
    /// from there must not be answered as that app: the path names another file for the daemon.
    func testAProgramBoundOverAPolicyPathInItsOwnMountNamespaceIsNotThatApp() throws {
        let ns = try makeNamespace()
        let dir = try makeTempDir()
        let updater = dir + "/updater"
        try FileManager.default.copyItem(atPath: Subprocess.resolve("cat"), toPath: updater)
        chmod(updater, 0o755)
        let socat = Subprocess.resolve("socat")
        let config = try writeConfig("""
            [App updater]
            Executable=\(updater)
            WWAN=allow

            """, in: dir)
        let socket = dir + "/netpermd.sock"
        _ = try startDaemon(in: ns, socket: socket, config: config)

        // The real updater's path, run honestly, is the app (a copy of socat would not be: it checks the file).
        let spoof = "mount --bind \(socat) \(updater) && exec \(updater) -t 5 - UNIX-CONNECT:\(socket)"
        let r = try Subprocess.run(["unshare", "-Urm", "sh", "-c", spoof], input: Array("QUERY\n".utf8), timeout: 10)
        XCTAssertEqual(r.status, 0, r.summary)
        let reply = try JSONValue.object(r.lines.first ?? "")
        let identity = reply["identity"] as? [String: Any] ?? [:]
        XCTAssertNotEqual(reply["app"] as? String, "updater", "answered as the app whose path it borrowed: \(r.stdout)")
        XCTAssertNil(identity["executable"] as? String, r.stdout)
        XCTAssertTrue((identity["problem"] as? String ?? "").contains("mount namespace of its own"), r.stdout)
    }
}
