// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol

/// `netpermctl agent`: answers prompts on the terminal (or from a pipe), one at a time, one key each: y allow, n not
/// this kind ("Wi-Fi only" for cellular), o once, s skip (the prompt stays open until it expires). A question whose
/// prompt closes meanwhile (expired, answered elsewhere, its asker gone) is taken off the screen; a key pressed for
/// it after that answers nothing, and one that crossed the closing is refused by the daemon, which stores nothing.
enum Agent {
    /// The keys of the options (`PromptText.options`, by their action key); s skips.
    static let keys: [(key: UInt8, option: String?)] = [
        (UInt8(ascii: "y"), "allow"), (UInt8(ascii: "n"), "deny"), (UInt8(ascii: "o"), "once"),
        (UInt8(ascii: "e"), "allow-everyone"), (UInt8(ascii: "s"), nil),
    ]

    /// The two lines of a question: what is asked (and whose the answer is), then the keys (the cursor waits after
    /// them).
    static func question(_ p: JSON, privileged: Bool) -> (String, String) {
        let shown = p.forTerminal
        let options = PromptText.options(shown, privileged: privileged)
        let seconds = shown["timeout_sec"]?.intValue.map { ", it expires within \($0) s" } ?? ""
        var line = ""
        for (key, name) in keys {
            guard let name, let o = options.first(where: { $0.key == name }) else { continue }
            line += "  [\(Character(Unicode.Scalar(key)))] \(o.label)"
                + (o.choice == .once ? " (\(PromptText.onceUntil(shown)))" : "")
        }
        let whose = PromptText.whose(shown, privileged: privileged).map { " " + $0 } ?? ""
        return ("prompt \(shown["id"]?.intValue ?? 0): \(PromptText.question(shown)).\(whose)",
                line + "  [s] skip (ask again later\(seconds)): ")
    }

    static func run(socketPath: String) -> Never {
        let session = AgentSession(socketPath: socketPath)
        let terminal = Terminal(fd: STDIN_FILENO)
        terminal.oneKeyAtATime()
        Screen.out("netpermctl agent: waiting for prompts; answers are for \(session.answersFor) "
            + "(one key each; Ctrl-D or Ctrl-C to stop)\n")
        let asker = Asker(session: session, terminal: terminal)
        while true {
            if session.hasChanges { asker.take(session.changes(reading: false)) }
            asker.askNext()
            var fds = [pollfd(fd: session.conn.fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)]
            do { _ = try sys { poll(&fds, nfds_t(fds.count), -1) } } catch { die("poll: \(error)", .failed) }
            // Keys first: one pressed before the agent heard that its prompt closed is sent, and refused.
            if fds[1].revents != 0 {
                let bytes = terminal.read()
                // An agent that can no longer answer leaves, so the daemon stops holding prompts for it.
                if bytes.isEmpty { asker.endOfInput() }
                for b in bytes { asker.key(b) }
            }
            if fds[0].revents != 0 { asker.take(session.changes(reading: true)) }
        }
    }

    /// The prompts waiting and the one asked, changed by the daemon's changes and the keys pressed.
    private final class Asker {
        let session: AgentSession
        let terminal: Terminal
        var queue: [JSON] = []
        var current: (prompt: JSON, rows: Int)?

        init(session: AgentSession, terminal: Terminal) {
            self.session = session
            self.terminal = terminal
        }

        /// The question goes (on a terminal it is erased; a pipe's reader gets a line break), then `message`.
        func clear(_ message: String) {
            if let c = current {
                current = nil
                Output.out(terminal.isTTY ? "\r" + (c.rows > 1 ? "\u{1B}[\(c.rows - 1)A" : "") + "\u{1B}[J" : "\n")
            }
            Screen.out(message + "\n")
        }

        func take(_ changes: [AgentSession.Change]) {
            for change in changes {
                switch change {
                case let .opened(p): queue.append(p)
                case let .closed(id, why, _):
                    queue.removeAll { $0["id"]?.intValue == id }
                    guard let c = current, c.prompt["id"]?.intValue == id else { continue }
                    let app = c.prompt.forTerminal["app"]?.stringValue ?? "?"
                    switch why {
                    case "prompt-expired": clear("prompt \(id) for \(app) expired unanswered: nothing was stored")
                    case "prompt-answered": clear("prompt \(id) for \(app) was answered elsewhere")
                    case "prompt-withdrawn":
                        clear("prompt \(id) for \(app) was withdrawn: the process that asked has exited")
                    default: clear("prompt \(id) for \(app) is no longer open")
                    }
                case let .budget(e):
                    Screen.out(Usage.notice(e.forTerminal) + "\n")
                case .stopping:
                    clear("netpermd is stopping")
                }
            }
        }

        func endOfInput() -> Never {
            clear("end of input: no more answers")
            terminal.restore()
            exit(.ok)
        }

        func key(_ b: UInt8) {
            // Line ends and spaces separate answers typed into a pipe.
            if [0x0A, 0x0D, 0x20, 0x09].contains(b) { return }
            if b == 0x04 { endOfInput() }
            guard let c = current else {
                Screen.out("no prompt is waiting for an answer: key ignored\n")
                return
            }
            let options = PromptText.options(c.prompt.forTerminal, privileged: session.privileged)
            guard let (_, name) = Agent.keys.first(where: { k in
                k.key == b | 0x20 && (k.option.map { n in options.contains { $0.key == n } } ?? true)
            }) else {
                return unknownKey(c.prompt, options)
            }
            let id = c.prompt["id"]?.intValue ?? 0
            guard let name, let option = options.first(where: { $0.key == name }) else {
                clear("skipped: prompt \(id) stays open until it expires (nothing is stored)")
                return
            }
            let label = option.label
            switch session.answer(id, option.choice, everyone: option.everyone) {
            case let .done(reply): clear(PromptText.answered(reply.forTerminal, label: label))
            case let .refused(code, message) where code == ErrorCode.notFound.rawValue:
                clear("too late: \(message)")
            case let .refused(_, message): clear("netpermd refused: \(message)")
            }
        }

        /// A key that is no option: the keys' line again, saying so; the question stays.
        func unknownKey(_ prompt: JSON, _ options: [PromptText.Option]) {
            Output.out(terminal.isTTY ? "\r\u{1B}[J" : "\n")
            let offered = Agent.keys.filter { k in k.option.map { n in options.contains { $0.key == n } } ?? true }
                .map { String(Character(Unicode.Scalar($0.key))) }
            Screen.out("press " + offered.dropLast().joined(separator: ", ") + " or " + (offered.last ?? "s") + "."
                + Agent.question(prompt, privileged: session.privileged).1.dropFirst())
        }

        /// The next prompt in line is asked once no question is on the screen.
        func askNext() {
            guard current == nil, !queue.isEmpty else { return }
            let p = queue.removeFirst()
            let (first, second) = Agent.question(p, privileged: session.privileged)
            current = (p, terminal.rows(first) + terminal.rows(second))
            Screen.out(first + "\n" + second)
        }
    }
}

/// Standard input as the agent reads it: on a terminal, one key at a time without echo (restored however the agent
/// ends: Ctrl-C, a signal, exit), from a pipe as it comes.
final class Terminal {
    let fd: Int32
    let isTTY: Bool
    private nonisolated(unsafe) static var saved: termios?

    init(fd: Int32) {
        self.fd = fd
        isTTY = isatty(fd) == 1
    }

    func oneKeyAtATime() {
        guard isTTY else { return }
        var t = termios()
        guard tcgetattr(fd, &t) == 0 else { return }
        Self.saved = t
        t.c_lflag &= ~tcflag_t(ICANON | ECHO)
        withUnsafeMutableBytes(of: &t.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        tcsetattr(fd, TCSANOW, &t)
        atexit { Terminal.restoreSaved() }
        for s in [SIGINT, SIGTERM, SIGHUP] {
            signal(s) { sig in
                Terminal.restoreSaved()
                Glibc.signal(sig, SIG_DFL)
                raise(sig)
            }
        }
    }

    func restore() { Self.restoreSaved() }

    private static func restoreSaved() {
        guard var t = saved else { return }
        tcsetattr(STDIN_FILENO, TCSANOW, &t)
    }

    /// What is there to read; empty at the end of input.
    func read() -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = (try? sys { buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) } }) ?? 0
        return Array(buffer.prefix(max(0, n)))
    }

    /// How many rows `text` takes on the terminal (one where the width is unknown).
    func rows(_ text: String) -> Int {
        var w = winsize()
        guard isTTY, ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &w) == 0, w.ws_col > 0 else { return 1 }
        return max(1, (SafeText.escape(text).unicodeScalars.count + Int(w.ws_col) - 1) / Int(w.ws_col))
    }
}
