// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol
import NetpermSystemd

/// `netpermctl agent --notify`: each prompt as a desktop notification on the user's session bus, with the choices
/// as its actions and no default action (a click on its body grants nothing: only a button does), critical and
/// resident so it stays until answered; the answer is the daemon's `ANSWER`. A notification is closed when its prompt closes (expired,
/// answered elsewhere, its asker gone); an action that comes after that is still sent, and the daemon refuses it. A
/// notification the person dismisses leaves its prompt open until it expires. The agent takes its notifications
/// with it when it goes (a signal, the daemon gone); those a killed agent left are closed by the next one (their ids
/// are kept in `$XDG_RUNTIME_DIR`, with the server's connection they belong to). A server that restarts is shown the
/// open prompts again.
enum NotifyAgent {
    /// Notifications shown, by their id, and (to refuse late actions by name) those closed lately.
    private struct Shown {
        var prompts: [UInt32: JSON] = [:]
        var byPrompt: [Int: UInt32] = [:]
        var closed: [(notification: UInt32, prompt: JSON)] = []

        mutating func close(prompt id: Int) -> UInt32? {
            guard let n = byPrompt.removeValue(forKey: id), let p = prompts.removeValue(forKey: n) else { return nil }
            closed.append((n, p))
            if closed.count > 64 { closed.removeFirst() }
            return n
        }

        func prompt(of n: UInt32) -> JSON? { prompts[n] ?? closed.last { $0.notification == n }?.prompt }
    }

    static func run(socketPath: String) -> Never {
        let notes: DesktopNotifications
        let server: String
        do {
            notes = try DesktopNotifications()
            let caps = try notes.capabilities()
            server = notes.serverName() ?? "the notification server"
            guard caps.contains("actions") else {
                die("agent --notify: \(server) on \(notes.address) shows no actions (its capabilities: "
                    + caps.joined(separator: ", ") + "), so its notifications could not be answered", .noNotifications)
            }
        } catch {
            die("agent --notify: no notification server to show prompts with: \(error)", .noNotifications)
        }
        notes.findOwner()
        let leftovers = Leftovers()
        leftovers.closeStale(notes)
        let session = AgentSession(socketPath: socketPath)
        Screen.out("netpermctl agent --notify: prompts go to \(server) on \(notes.address); answers are for "
            + "\(session.answersFor) (Ctrl-C to stop)\n")
        var shown = Shown()
        // Notifications asked of the server and not answered yet: the prompt each is for.
        var asked: [UInt64: JSON] = [:]
        // Whatever way the agent goes, its notifications go first: a button left behind would answer nothing.
        beforeExit = {
            for n in shown.prompts.keys.sorted() { try? notes.close(n) }
            leftovers.record([], owner: notes.owner)
        }
        let stop: Int32
        do { stop = try Signals.descriptor([SIGTERM, SIGINT, SIGHUP]) } catch { die("signalfd: \(error)", .failed) }

        func show(_ p: JSON) {
            let t = p.forTerminal
            let options = PromptText.options(t, privileged: session.privileged)
            let whose = PromptText.whose(t, privileged: session.privileged).map { "\n" + $0 } ?? ""
            let body = markup(PromptText.question(t) + "." + whose + "\n" + PromptText.expiry(t) + "\nAllow once: "
                + PromptText.onceUntil(t) + ".")
            // No default action: a click on the body, stray or meant to read it, must not open the app.
            // And "Settings", where the settings app is installed: every app's choice, not only this one's.
            let actions = options.map { ($0.key, $0.label) } + (SettingsApp.installed ? [(SettingsApp.key, "Settings")] : [])
            // Asked without waiting: a server slow to show one (seconds) holds up no other prompt, and no answer.
            do {
                let token = try notes.notifyLater(appName: "netpermd", icon: t["icon"]?.stringValue ?? "network-wireless", summary: PromptText.summary(t),
                                                  body: body, actions: actions, urgency: 2)
                asked[token] = p
            } catch {
                Screen.err("netpermctl: cannot show prompt \(t["id"]?.intValue ?? 0): \(error)\n")
            }
        }

        func shownNow(_ token: UInt64, _ result: Result<UInt32, DesktopNotifications.Failure>) {
            guard let p = asked.removeValue(forKey: token), let prompt = p["id"]?.intValue else { return }
            switch result {
            case let .failure(e):
                Screen.err("netpermctl: \(server) did not show prompt \(prompt): \(e) (it stays open)\n")
            case let .success(id):
                guard session.openPrompts.contains(where: { $0["id"]?.intValue == prompt }) else {
                    // Closed while the server took its time: off the screen at once.
                    try? notes.close(id)
                    return
                }
                shown.prompts[id] = p
                shown.byPrompt[prompt] = id
                leftovers.record(shown.prompts.keys.sorted(), owner: notes.owner)
                Screen.out("prompt \(prompt) for \(p.forTerminal["app"]?.stringValue ?? "?"): notification \(id)\n")
            }
        }

        func withdraw(_ prompt: Int, _ why: String) {
            guard let n = shown.close(prompt: prompt) else { return }
            Screen.out("prompt \(prompt) \(why): notification \(n) closed\n")
            do { try notes.close(n) } catch { Screen.err("netpermctl: cannot close notification \(n): \(error)\n") }
            leftovers.record(shown.prompts.keys.sorted(), owner: notes.owner)
        }

        func take(_ changes: [AgentSession.Change]) {
            for change in changes {
                switch change {
                case let .opened(p): show(p)
                case let .closed(id, why, _):
                    withdraw(id, ["prompt-expired": "expired unanswered", "prompt-answered": "was answered",
                                  "prompt-withdrawn": "was withdrawn (its asker has exited)"][why] ?? "is no longer open")
                case let .budget(e): Screen.out(Usage.notice(e.forTerminal) + "\n")
                case .stopping: Screen.out("netpermd is stopping\n")
                }
            }
        }

        func signal(_ s: DesktopNotifications.Signal) {
            switch s {
            case let .actionInvoked(n, key):
                guard let p = shown.prompt(of: n), let id = p["id"]?.intValue else { return }
                if key == SettingsApp.key {
                    Screen.out("notification \(n) for prompt \(id): opening the settings app\n")
                    SettingsApp.open()
                    return
                }
                let options = PromptText.options(p.forTerminal, privileged: session.privileged)
                guard let option = options.first(where: { $0.key == key }) else {
                    // A server that sends "default" for a click on the body anyway: nothing is granted.
                    Screen.out("notification \(n) for prompt \(id): \(key == "default" ? "a click on it" : "action \(key)") "
                        + "answers nothing; its buttons do\n")
                    return
                }
                let label = option.label
                switch session.answer(id, option.choice, everyone: option.everyone) {
                case let .done(reply): Screen.out(PromptText.answered(reply.forTerminal, label: label) + "\n")
                case let .refused(_, message):
                    Screen.out("prompt \(id): \(label) refused: \(message)\n")
                    // Said where it was asked: a notification that just went away would read as done.
                    let t = p.forTerminal
                    // Without waiting either: its answer (no prompt of ours) is dropped as it comes.
                    _ = try? notes.notifyLater(appName: "netpermd", icon: "dialog-warning",
                                          summary: "“\(label)” was not stored for \(t["app"]?.stringValue ?? "?")",
                                          body: markup(message), actions: [], urgency: 1, resident: false)
                }
                withdraw(id, "answered here")
            case let .closed(n, reason):
                // Closed by the person (reason 2): not now. The prompt is dismissed with it (stores nothing; the app's
                // blocked traffic asks again after a quiet minute, its asking at once), so no question stays open that
                // nobody sees. Closed by the server otherwise (expired, 1; undefined, 4): the prompt stays open.
                guard reason != 3, let p = shown.prompts[n], let id = p["id"]?.intValue else { return }
                _ = shown.close(prompt: id)
                leftovers.record(shown.prompts.keys.sorted(), owner: notes.owner)
                guard reason == 2 else {
                    Screen.out("notification \(n) for prompt \(id) closed by \(server): the prompt stays open until it expires\n")
                    return
                }
                switch session.dismiss(id) {
                case .done: Screen.out("notification \(n) for prompt \(id) dismissed: the prompt is closed unanswered\n")
                case let .refused(_, message): Screen.out("notification \(n) for prompt \(id) dismissed: \(message)\n")
                }
            case let .shown(token, result): shownNow(token, result)
            case let .serverChanged(owner):
                // Its notifications went with the old server: the open prompts are shown again by the new one.
                let open = session.openPrompts
                shown = Shown()
                asked = [:]
                leftovers.record([], owner: owner)
                guard owner != nil else {
                    Screen.out("the notification server is gone: its prompts will be shown again when one returns\n")
                    return
                }
                Screen.out("the notification server restarted: showing \(open.count) open prompt(s) again\n")
                for p in open { show(p) }
            }
        }

        while true {
            if session.hasChanges { take(session.changes(reading: false)) }
            // Signals read during a call are queued by sd-bus, not left on the socket: taken before each poll.
            do { for s in try notes.process() { signal(s) } } catch { die("agent --notify: \(error)", .noNotifications) }
            if session.hasChanges { continue }
            var fds = [pollfd(fd: session.conn.fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: notes.fd, events: notes.events, revents: 0),
                       pollfd(fd: stop, events: Int16(POLLIN), revents: 0)]
            do { _ = try sys { poll(&fds, nfds_t(fds.count), -1) } } catch { die("poll: \(error)", .failed) }
            if fds[2].revents != 0 {
                Screen.out("stopping: the notifications of open prompts are closed (the prompts stay open)\n")
                beforeExit?()
                exit(.ok)
            }
            if fds[0].revents != 0 { take(session.changes(reading: true)) }
        }
    }

    /// The ids of the notifications shown, with the server connection they belong to, in `$XDG_RUNTIME_DIR` (the
    /// user's own, mode 0700): what a killed agent left, for the next one to close. Ids of another connection (the
    /// server restarted since) are not the agent's and are left alone.
    final class Leftovers {
        let path: String?

        init() {
            path = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) + "/netpermctl-agent-notifications" }
        }

        func closeStale(_ notes: DesktopNotifications) {
            guard let path, let text = FD.readText(path) else { return }
            let lines = text.split(separator: "\n").map(String.init)
            guard let owner = notes.owner, lines.first == owner else { return }
            let stale = lines.dropFirst().compactMap { UInt32($0) }
            for n in stale { try? notes.close(n) }
            if !stale.isEmpty { Screen.out("closed \(stale.count) notification(s) a stopped agent left\n") }
            record([], owner: owner)
        }

        func record(_ ids: [UInt32], owner: String?) {
            guard let path else { return }
            let text = ([owner ?? ""] + ids.map(String.init)).joined(separator: "\n") + "\n"
            _ = try? AtomicFile.write(path, text, syncDirectory: { _ throws(Errno) in })
        }
    }

    /// The body may be shown as markup (the specification's subset of HTML): the text stays text.
    static func markup(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(c)
            }
        }
        return out
    }
}
