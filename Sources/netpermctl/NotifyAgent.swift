// SPDX-License-Identifier: LGPL-2.1-or-later
import Glibc
import NetpermIO
import NetpermProtocol
import NetpermSystemd

/// `netpermctl agent --notify`: prompts as desktop notifications on the user's session bus, with the choices as
/// their actions and no default action (a click on the body grants nothing: only a button does), critical and
/// resident so they stay until answered; the answer is the daemon's `ANSWER`. As a phone asks one question at a
/// time, at most `NotifyLineup.questions` prompts are shown at once (fairly among uids: `NotifyLineup`), and one
/// more notification says how many others wait; each comes up as one shown closes. A notification is closed when
/// its prompt closes (expired, answered elsewhere, its asker gone), and a prompt that closes before its turn is never
/// shown; an action that comes after its notification closed is still sent, and the daemon refuses it if the prompt
/// has closed. A notification the person dismisses leaves its prompt open until it expires. Every call to the
/// server goes without waiting (its reply handled when it comes): a server slow to draw holds up no answer. The
/// agent takes its notifications with it when it goes (a signal, the daemon gone); those a killed agent left are
/// closed by the next one (their ids are kept in `$XDG_RUNTIME_DIR`, with the server's connection they belong to).
/// A server that restarts is shown the open prompts again.
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

    /// A prompt's notification: asked of the server (the Notify's token), or shown (its id).
    private enum Showing {
        case asking(UInt64)
        case shown(UInt32)
    }

    /// The one notification that says how many prompts wait besides those shown.
    private struct Summary {
        var id: UInt32?
        /// Its Notify in flight, and what it says; one at a time, the next when it has come.
        var token: UInt64?
        var sending: String?
        /// What the one shown says.
        var text: String?
        /// No prompt waits any more while its Notify was in flight: closed as soon as it comes.
        var unwanted = false
        /// The person (or the server) closed it: not shown again until no prompt waits.
        var hidden = false
    }

    static func run(socketPath: String) -> Never {
        // Its questions in the person's language (the terminal agent's stay as its tests and scripts read them).
        Localized.start()
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
        let board = Board(notes: notes, server: server, session: session, leftovers: leftovers)
        beforeExit = { board.closeAll() }
        let stop: Int32
        do { stop = try Signals.descriptor([SIGTERM, SIGINT, SIGHUP]) } catch { die("signalfd: \(error)", .failed) }

        while true {
            if session.hasChanges { board.take(session.changes(reading: false)) }
            // Signals and replies read during a call are queued by sd-bus, not left on the socket: taken before each poll.
            do { for s in try notes.process() { board.signal(s) } } catch { die("agent --notify: \(error)", .noNotifications) }
            if session.hasChanges { continue }
            board.settle()
            var fds = [pollfd(fd: session.conn.fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: notes.fd, events: notes.events, revents: 0),
                       pollfd(fd: stop, events: Int16(POLLIN), revents: 0)]
            // Bounded by the calls' time-outs: a reply that never comes is still answered, by sd-bus, on time.
            do { _ = try sys { poll(&fds, nfds_t(fds.count), notes.pollTimeout) } } catch { die("poll: \(error)", .failed) }
            if fds[2].revents != 0 {
                Screen.out("stopping: the notifications of open prompts are closed (the prompts stay open)\n")
                beforeExit?()
                exit(.ok)
            }
            if fds[0].revents != 0 { board.take(session.changes(reading: true)) }
        }
    }


    /// What the agent shows and what is open in the daemon, changed by the daemon's changes and the server's
    /// signals (one object, so that each of its steps is a method of its own).
    private final class Board {
        let notes: DesktopNotifications
        let server: String
        let session: AgentSession
        let leftovers: Leftovers
        // The prompts open in the daemon, and their ids in the order they came (ids are no order: they are keyed).
        var open: [Int: JSON] = [:]
        var arrival: [Int] = []
        var showing: [Int: Showing] = [:]
        // Notify calls for prompts in flight: the prompt each is for; those to close as soon as they come.
        var asked: [UInt64: Int] = [:]
        var unwanted: Set<UInt64> = []
        // Prompts the server closed (or could not show): still open, and waiting, but not shown again.
        var setAside: Set<Int> = []
        var shown = Shown()
        var summary = Summary()
        // What the leftovers' file says, written only when it changes.
        var recorded: [UInt32] = []

        init(notes: DesktopNotifications, server: String, session: AgentSession, leftovers: Leftovers) {
            self.notes = notes
            self.server = server
            self.session = session
            self.leftovers = leftovers
        }

        /// Whatever way the agent goes, its notifications go first: a button left behind would answer nothing.
        func closeAll() {
            for n in shown.prompts.keys.sorted() + (summary.id.map { [$0] } ?? []) { try? notes.closeLater(n) }
            notes.finish(within: 2)
            leftovers.record([], owner: notes.owner)
        }

        func record() {
            let ids = (Array(shown.prompts.keys) + (summary.id.map { [$0] } ?? [])).sorted()
            guard ids != recorded else { return }
            recorded = ids
            leftovers.record(ids, owner: notes.owner)
        }

        func closeLater(_ n: UInt32) {
            do { try notes.closeLater(n) } catch { Screen.err("netpermctl: cannot close notification \(n): \(error)\n") }
        }

        func show(_ id: Int) {
            guard let p = open[id] else { return }
            let t = p.forTerminal
            let options = PromptText.options(t, privileged: session.privileged)
            let whose = PromptText.whose(t, privileged: session.privileged).map { "\n" + $0 } ?? ""
            let body = markup(PromptText.question(t) + "." + whose + "\n" + PromptText.expiry(t) + "\n"
                + Localized.tr("Allow once: {until}.", [("until", PromptText.onceUntil(t))]))
            // No default action: a click on the body, stray or meant to read it, must not open the app.
            // And "Settings", where the settings app is installed: every app's choice, not only this one's.
            let actions = options.map { ($0.key, $0.label) } + (SettingsApp.installed ? [(SettingsApp.key, Localized.tr("Settings"))] : [])
            do {
                let token = try notes.notifyLater(appName: "netpermd", icon: t["icon"]?.stringValue ?? "network-wireless", summary: PromptText.summary(t),
                                                  body: body, actions: actions, urgency: 2)
                asked[token] = id
                showing[id] = .asking(token)
            } catch {
                setAside.insert(id)
                Screen.err("netpermctl: cannot show prompt \(id): \(error)\n")
            }
        }

        /// Its notification goes (`why` said when it was on the screen); the prompt may still be open.
        func takeDown(_ id: Int, _ why: String) {
            switch showing.removeValue(forKey: id) {
            case let .asking(token)?: unwanted.insert(token)
            case let .shown(n)?:
                _ = shown.close(prompt: id)
                Screen.out("prompt \(id) \(why): notification \(n) closed\n")
                closeLater(n)
            case nil: break
            }
        }

        /// What the summary says: how many wait, and the first few, in the order they would be asked.
        func summaryText(_ waiting: [Int]) -> (summary: String, body: String) {
            let next = NotifyLineup.pick(waiting.map { NotifyLineup.Waiting(prompt: $0, uid: open[$0]?["uid"]?.intValue) },
                                         count: 5)
            let names = next.compactMap { open[$0]?.forTerminal }.map { t in
                PromptText.app(t) + (session.privileged ? t["uid"]?.intValue.map { " (\(PromptText.user($0)))" } ?? "" : "")
            }
            let more = waiting.count - names.count
            let list = names.joined(separator: ", ") + (more > 0 ? Localized.tr(" and {n} more", [("n", String(more))]) : "")
            return (waiting.count == 1 ? Localized.tr("1 more app is waiting")
                        : Localized.tr("{n} more apps are waiting", [("n", String(waiting.count))]),
                    markup(Localized.tr("Waiting to be asked: {list}.", [("list", list)]) + "\n"
                           + (SettingsApp.installed ? Localized.tr("Each is asked here as the questions shown are answered; Settings lists them all.")
                                                    : Localized.tr("Each is asked here as the questions shown are answered."))))
        }

        /// What is shown follows what is open: the lineup's prompts, and the summary of the rest.
        func settle() {
            guard notes.owner != nil else { return }
            let candidates = arrival.filter { !setAside.contains($0) }
            let picked = NotifyLineup.pick(candidates.map { NotifyLineup.Waiting(prompt: $0, uid: open[$0]?["uid"]?.intValue) })
            let wanted = Set(picked)
            for id in showing.keys.sorted() where !wanted.contains(id) { takeDown(id, "waits for another's turn") }
            // A notification on its way to be closed as soon as it comes counts until then: the bound holds at every
            // moment on the server's screen, and a struggling server is never sent more than that.
            for id in picked where showing[id] == nil {
                guard showing.count + unwanted.count < NotifyLineup.questions else { break }
                show(id)
            }
            let waiting = arrival.filter { showing[$0] == nil }
            if waiting.isEmpty {
                summary.hidden = false
                if summary.token != nil { summary.unwanted = true }
                if let n = summary.id {
                    summary.id = nil
                    summary.text = nil
                    closeLater(n)
                }
            } else if !summary.hidden {
                summary.unwanted = false
                let (title, body) = summaryText(waiting)
                if summary.token == nil, summary.id == nil || summary.text != title + "\n" + body {
                    do {
                        summary.token = try notes.notifyLater(appName: "netpermd", icon: "network-wireless", summary: title, body: body,
                                                              actions: SettingsApp.installed ? [(SettingsApp.key, Localized.tr("Settings"))] : [],
                                                              urgency: 1, replaces: summary.id ?? 0)
                        summary.sending = title + "\n" + body
                    } catch {
                        Screen.err("netpermctl: cannot show how many prompts wait: \(error)\n")
                    }
                }
            }
            record()
        }

        func summaryShown(_ result: Result<UInt32, DesktopNotifications.Failure>) {
            summary.token = nil
            switch result {
            case let .failure(e):
                // Not asked again until it says something else.
                summary.text = summary.sending
                Screen.err("netpermctl: \(server) did not show how many prompts wait: \(e)\n")
            case let .success(n):
                if summary.unwanted {
                    summary.unwanted = false
                    if summary.id == n { summary.id = nil }
                    summary.text = nil
                    closeLater(n)
                    return
                }
                // A server that made a new one rather than replace the old: the old goes.
                if let old = summary.id, old != n { closeLater(old) }
                summary.id = n
                summary.text = summary.sending
            }
        }

        func shownNow(_ token: UInt64, _ result: Result<UInt32, DesktopNotifications.Failure>) {
            if token == summary.token { return summaryShown(result) }
            // Not ours: a notice of a refused answer, or a call to a server since gone.
            guard let id = asked.removeValue(forKey: token) else { return }
            if unwanted.remove(token) != nil {
                // Its prompt closed, or gave way to another's, while the server took its time: off the screen at once.
                if case let .success(n) = result { closeLater(n) }
                return
            }
            switch result {
            case let .failure(e):
                showing[id] = nil
                setAside.insert(id)
                Screen.err("netpermctl: \(server) did not show prompt \(id): \(e) (it stays open)\n")
            case let .success(n):
                guard let p = open[id] else { return closeLater(n) }
                showing[id] = .shown(n)
                shown.prompts[n] = p
                shown.byPrompt[id] = n
                Screen.out("prompt \(id) for \(p.forTerminal["app"]?.stringValue ?? "?"): notification \(n)\n")
            }
        }

        /// The prompt is done with here (answered, dismissed) or closed: neither shown nor counted as waiting, even
        /// before the daemon's word of it comes.
        func forget(_ id: Int) {
            open[id] = nil
            arrival.removeAll { $0 == id }
            setAside.remove(id)
        }

        func take(_ changes: [AgentSession.Change]) {
            for change in changes {
                switch change {
                case let .opened(p):
                    guard let id = p["id"]?.intValue, open[id] == nil else { continue }
                    open[id] = p
                    arrival.append(id)
                case let .closed(id, why, _):
                    forget(id)
                    takeDown(id, ["prompt-expired": "expired unanswered", "prompt-answered": "was answered",
                                  "prompt-withdrawn": "was withdrawn (its asker has exited)"][why] ?? "is no longer open")
                case let .budget(e): Screen.out(Usage.notice(e.forTerminal) + "\n")
                case .stopping: Screen.out("netpermd is stopping\n")
                }
            }
        }

        func signal(_ s: DesktopNotifications.Signal) {
            switch s {
            case let .actionInvoked(n, key) where n == summary.id:
                guard key == SettingsApp.key else {
                    Screen.out("the notification of the waiting prompts: \(key == "default" ? "a click on it" : "action \(key)") "
                        + "answers nothing\n")
                    return
                }
                Screen.out("the notification of the waiting prompts: opening the settings app\n")
                SettingsApp.open()
            case let .actionInvoked(n, key): answer(n, key)
            case let .closed(n, reason) where n == summary.id:
                guard reason != 3 else { return }
                summary.id = nil
                summary.text = nil
                summary.hidden = true
                Screen.out("the notification of the waiting prompts was closed: it comes back when they have all been asked\n")
            case let .closed(n, reason): closed(n, reason: reason)
            case let .shown(token, result): shownNow(token, result)
            case let .closeAnswered(n, failure):
                if let failure { Screen.err("netpermctl: cannot close notification \(n): \(failure)\n") }
            case let .serverChanged(owner): serverChanged(owner)
            }
        }

        /// An action of a prompt's notification: its answer, or the settings app.
        func answer(_ n: UInt32, _ key: String) {
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
            // Answered (or refused: closed already): not shown again, nor waiting, while the daemon's word of it
            // is on its way.
            forget(id)
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
            takeDown(id, "answered here")
        }

        /// A prompt's notification gone from the screen.
        func closed(_ n: UInt32, reason: UInt32) {
            // Closed by the person (reason 2): not now. The prompt is dismissed with it (stores nothing; the app's
            // blocked traffic asks again after a quiet minute, its asking at once), so no question stays open that
            // nobody sees. Closed by the server otherwise (expired, 1; undefined, 4): the prompt stays open, not
            // shown again.
            guard reason != 3, let p = shown.prompts[n], let id = p["id"]?.intValue else { return }
            _ = shown.close(prompt: id)
            showing[id] = nil
            guard reason == 2 else {
                setAside.insert(id)
                Screen.out("notification \(n) for prompt \(id) closed by \(server): the prompt stays open until it expires\n")
                return
            }
            forget(id)
            switch session.dismiss(id) {
            case .done: Screen.out("notification \(n) for prompt \(id) dismissed: the prompt is closed unanswered\n")
            case let .refused(_, message): Screen.out("notification \(n) for prompt \(id) dismissed: \(message)\n")
            }
        }

        /// Another server, or none: what was shown is gone with the old one.
        func serverChanged(_ owner: String?) {
            // Its notifications went with the old server: the open prompts are shown again by the new one.
            showing = [:]
            asked = [:]
            unwanted = []
            setAside = []
            shown = Shown()
            summary = Summary()
            recorded = []
            leftovers.record([], owner: owner)
            guard owner != nil else {
                Screen.out("the notification server is gone: its prompts will be shown again when one returns\n")
                return
            }
            Screen.out("the notification server restarted: showing \(min(open.count, NotifyLineup.questions)) open prompt(s) again"
                + (open.count > NotifyLineup.questions ? ", and how many others wait" : "") + "\n")
        }
    }

    /// The ids of the notifications shown, with the server connection they belong to, in `$XDG_RUNTIME_DIR` (the
    /// user's own, mode 0700): what a killed agent left, for the next one to close. Ids of another connection (the
    /// server restarted since) are not the agent's and are left alone.
    private final class Leftovers {
        let path: String?

        init() {
            path = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) + "/netpermctl-agent-notifications" }
        }

        func closeStale(_ notes: DesktopNotifications) {
            guard let path, let text = FD.readText(path) else { return }
            let lines = text.split(separator: "\n").map(String.init)
            guard let owner = notes.owner, lines.first == owner else { return }
            let stale = lines.dropFirst().compactMap { UInt32($0) }
            for n in stale { try? notes.closeLater(n) }
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
