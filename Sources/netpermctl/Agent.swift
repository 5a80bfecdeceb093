import Glibc
import NetpermCore
import NetpermIO

/// `netpermctl agent`: answers prompts on the terminal (or from a pipe), one at a time.
enum Agent {
    static let kindNames: [String: String] = ["wifi": "Wi-Fi", "wwan": "WWAN", "ethernet": "Ethernet", "other": "Other",
                                                "metered": "metered links"]

    /// `p` as the daemon sent it: every string is escaped here (JSON.forTerminal).
    static func question(_ prompt: JSON) -> String {
        let p = prompt.forTerminal
        let id = p["identity"]
        var who: [String] = []
        if let exe = id?["executable"]?.stringValue { who.append(exe) }
        if let unit = id?["unit"]?.stringValue { who.append(unit) }
        if let uid = id?["uid"]?.intValue { who.append("uid \(uid)") }
        let kind = p["kind"]?.stringValue ?? "?"
        let link = p["link"]
        return "\(p["app"]?.stringValue ?? "?")\(who.isEmpty ? "" : " (" + who.joined(separator: ", ") + ")") wants "
            + "to use \(kindNames[kind] ?? kind) via \(Render.nameOver(link))"
            + (link?["metered"]?.boolValue == true ? " (metered)" : "") + ". Allow? [y]es / [n]o / [o]nce / [s]kip "
    }

    static func run(socketPath: String) -> Never {
        let conn = Connection.open(socketPath)
        let input = Connection(reading: STDIN_FILENO)
        do {
            // Budgets used up are told too: the agent's user is the one to reset them.
            try conn.send("SUBSCRIBE prompts usage")
            guard let ack = try conn.readLine(), let r = try? JSONParser.parse(ack) else { throw Errno(ECONNRESET) }
            guard r["ok"]?.boolValue == true else {
                die("\(r["error"]?.stringValue ?? "error"): \(r["message"]?.stringValue ?? ack)", .failed)
            }
            Screen.out("netpermctl agent: waiting for prompts (Ctrl-D or Ctrl-C to stop)\n")
            var inputEnded = false
            var prompts = Prompts()
            while let line = try nextLine(conn, watching: input, inputEnded: &inputEnded) {
                guard let e = try? JSONParser.parse(line) else { continue }
                prompts.note(e)
                while let p = prompts.next() { try ask(p, conn: conn, input: input, prompts: &prompts) }
            }
            die("netpermd closed the connection", .unreachable)
        } catch {
            die("lost the connection to netpermd: \(error)", .unreachable)
        }
    }

    /// The daemon's next line. Meanwhile the answers' input is watched: once it has ended with nothing left to
    /// read, the agent leaves, so the daemon stops holding prompts for an agent that cannot answer them.
    /// Lines typed ahead are kept for the next prompt, as the terminal would have kept them.
    static func nextLine(_ conn: Connection, watching input: Connection, inputEnded: inout Bool) throws(Errno)
        -> String? {
        while !conn.hasLine {
            var fds = [pollfd(fd: conn.fd, events: Int16(POLLIN), revents: 0)]
            if !inputEnded { fds.append(pollfd(fd: input.fd, events: Int16(POLLIN), revents: 0)) }
            _ = try sys { poll(&fds, nfds_t(fds.count), -1) }
            if fds.count > 1, fds[1].revents != 0, try !input.fill() {
                inputEnded = true
                if !input.hasLine {
                    Screen.out("end of input: no more answers\n")
                    exit(0)
                }
            }
            if fds[0].revents != 0 { break }
        }
        return try conn.readLine()
    }

    /// One prompt: ask until the answer is understood, then DECIDE (or skip). Events that arrive before the
    /// DECIDE reply are shown, not lost. The DECIDE names the app as the daemon did; what is shown is escaped.
    static func ask(_ p: JSON, conn: Connection, input: Connection, prompts: inout Prompts) throws(Errno) {
        let app = p.forTerminal["app"]?.stringValue ?? "?"
        while true {
            Screen.out(question(p))
            guard let answer = try input.readLine() else {
                Screen.out("\n")
                exit(0)   // end of input: nothing more to answer
            }
            let decision: String
            switch answer.trimmingSpacesLower {
            case "y", "yes": decision = "allow"
            case "n", "no": decision = "deny"
            case "o", "once": decision = "allow --once"
            case "s", "skip":
                Screen.out("skipped\n")
                return
            default:
                Screen.out("please answer y, n, o or s\n")
                continue
            }
            try conn.send("DECIDE \(p["app"]?.stringValue ?? "") \(p["kind"]?.stringValue ?? "") \(decision)")
            while let line = try conn.readLine() {
                guard let r = try? JSONParser.parse(line) else { continue }
                if r["event"] != nil {
                    // Prompts raised meanwhile are asked next, not lost.
                    prompts.note(r)
                    continue
                }
                if r["ok"]?.boolValue == true {
                    Screen.out("\(app): \(decision)\n")
                } else {
                    Screen.out("netpermd refused: \(r.forTerminal["message"]?.stringValue ?? SafeText.escape(line))\n")
                }
                return
            }
            throw Errno(ECONNRESET)
        }
    }
}

/// The prompts the agent has yet to ask, in the order they came, each asked once: from the snapshot, from
/// `prompt` events (also those that arrive while another is being answered), and from a `resync` after events
/// were lost. One that expired or was answered elsewhere is not asked.
struct Prompts {
    private var queue: [JSON] = []
    private var seen: Set<Int> = []

    mutating func note(_ e: JSON) {
        switch e["event"]?.stringValue.flatMap(EventName.init) {
        case .snapshot?, .resync?:
            let open = e["prompts"]?.arrayValue ?? []
            let openIDs = Set(open.compactMap { $0["id"]?.intValue })
            queue.removeAll { !openIDs.contains($0["id"]?.intValue ?? -1) }
            for p in open { add(p) }
        case .prompt?:
            add(e)
        case .promptExpired?:
            let shown = e.forTerminal
            Screen.out("prompt \(shown["id"]?.intValue ?? 0) for \(shown["app"]?.stringValue ?? "?") "
                + "(\(shown["kind"]?.stringValue ?? "?")) expired unanswered\n")
            drop(e)
        case .promptAnswered?:
            drop(e)
        case .stopping?:
            Screen.out("netpermd is stopping\n")
        case .usage?:
            Screen.out(Usage.notice(e.forTerminal) + "\n")
        case .link?, .app?, .policy?, .overflow?, nil:
            break
        }
    }

    mutating func next() -> JSON? { queue.isEmpty ? nil : queue.removeFirst() }

    private mutating func add(_ p: JSON) {
        guard let id = p["id"]?.intValue, seen.insert(id).inserted else { return }
        queue.append(p)
    }

    private mutating func drop(_ e: JSON) {
        let id = e["id"]?.intValue
        queue.removeAll { $0["id"]?.intValue == id }
    }
}

extension String {
    var trimmingSpacesLower: String {
        String(self.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
            .lowercased()
    }
}
