// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The shell completions, run for real: bash calls the function `complete -p netpermctl` names, as readline
/// would; zsh runs its whole completion system (compinit) in a pseudo-terminal and a Tab is typed.
final class CompletionTests: XCTestCase {
    static let commands = ManPageTests.netpermctlCommands
    static let bashScript = Repository.path("completions/netpermctl.bash")
    static let zshDir = Repository.path("completions")

    private var scratch = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        Glibc.signal(SIGPIPE, SIG_IGN)
        scratch = try makeTempDir()
    }

    // MARK: - bash

    /// The candidates bash offers for `words` (the last one is being completed), with `env` added.
    func bash(_ words: [String], env: [String] = [], file: StaticString = #filePath,
              line: UInt = #line) throws -> [String] {
        let script = """
            source "$1" || exit 10
            shift
            spec=$(complete -p netpermctl) || exit 11
            fn=${spec##*-F }; fn=${fn%% *}
            COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
            COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
            "$fn" netpermctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" || exit 12
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let r = try Subprocess.run(["env"] + env + ["bash", "--norc", "--noprofile", "-c", script, "bash",
                                                    Self.bashScript] + words, timeout: 20)
        XCTAssertEqual(r.status, 0, r.summary, file: file, line: line)
        XCTAssertEqual(r.stderr, "", "completion wrote to stderr: \(r.summary)", file: file, line: line)
        return r.lines.filter { !$0.isEmpty }
    }

    func testBashRegistersAFunctionForNetpermctl() throws {
        let r = try Subprocess.run(["bash", "--norc", "--noprofile", "-c", "source \"$1\" && complete -p netpermctl",
                                    "bash", Self.bashScript])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.stdout, "complete -F _netpermctl netpermctl\n")
    }

    func testBashCompletesCommandsAndHelpCommand() throws {
        XCTAssertEqual(try bash(["netpermctl", "de"]), ["decide", "decisions"])
        XCTAssertEqual(try bash(["netpermctl", "agent", "--n"]), ["--notify"])
        XCTAssertEqual(try bash(["netpermctl", "p"]), ["prompts", "ping"])
        XCTAssertEqual(try bash(["netpermctl", ""]), Self.commands)
        // After options, the command is still the first word that is not one.
        XCTAssertEqual(try bash(["netpermctl", "--json", "--socket", "/tmp/x", "rel"]), ["reload"])
        XCTAssertEqual(try bash(["netpermctl", "help", "q"]), ["query"])
        XCTAssertEqual(try bash(["netpermctl", "help", ""]), Self.commands)
        XCTAssertEqual(try bash(["netpermctl", "help", "query", ""]), [])
    }

    func testBashCompletesOptionsBeforeAndAfterTheCommand() throws {
        XCTAssertEqual(try bash(["netpermctl", "--j"]), ["--json"])
        XCTAssertEqual(try bash(["netpermctl", "--"]), ["--socket", "--json", "--terse", "--help", "--version"])
        XCTAssertEqual(try bash(["netpermctl", "-"]), ["--socket", "-j", "--json", "-t", "--terse", "-h", "--help",
                                                       "--version"])
        XCTAssertEqual(try bash(["netpermctl", "links", "--te"]), ["--terse"])
        XCTAssertEqual(try bash(["netpermctl", "wait", "--t"]), ["--terse", "--timeout"])
        XCTAssertEqual(try bash(["netpermctl", "wait", ""]), ["--app", "--timeout", "--"])
        XCTAssertEqual(try bash(["netpermctl", "wait", "--timeout", ""]), [], "seconds are not guessed")
    }

    func testBashCompletesDecideAndForget() throws {
        XCTAssertEqual(try bash(["netpermctl", "decide", "maps", ""]), ["wifi", "wwan", "ethernet", "other", "metered"])
        XCTAssertEqual(try bash(["netpermctl", "decide", "maps", "w"]), ["wifi", "wwan"])
        XCTAssertEqual(try bash(["netpermctl", "decide", "maps", "wwan", ""]), ["allow", "deny"])
        XCTAssertEqual(try bash(["netpermctl", "decide", "maps", "wwan", "d"]), ["deny"])
        XCTAssertEqual(try bash(["netpermctl", "decide", "maps", "wwan", "allow", ""]), ["--once"])
        XCTAssertEqual(try bash(["netpermctl", "decide", "maps", "wwan", "allow", "--o"]), ["--once"])
        XCTAssertEqual(try bash(["netpermctl", "decide", "maps", "wwan", "allow", "--once", ""]), [])
        XCTAssertEqual(try bash(["netpermctl", "--json", "decide", "maps", "e"]), ["ethernet"])
        XCTAssertEqual(try bash(["netpermctl", "forget", "maps", ""]), ["wifi", "wwan", "ethernet", "other", "metered"])
        XCTAssertEqual(try bash(["netpermctl", "forget", "maps", "wwan", ""]), [])
        XCTAssertEqual(try bash(["netpermctl", "usage", "r"]), ["reset"])
        XCTAssertEqual(try bash(["netpermctl", "usage", "reset", "r"]), [], "an app, never reset again")
    }

    func testBashCompletesLinksFilesAndTheCommandAfterWaitDashDash() throws {
        let links = try FileManager.default.contentsOfDirectory(atPath: "/sys/class/net").sorted()
        XCTAssertTrue(links.contains("lo"))
        XCTAssertEqual(try bash(["netpermctl", "links", ""]).sorted(), links)
        XCTAssertEqual(try bash(["netpermctl", "links", "l"]).sorted(), links.filter { $0.hasPrefix("l") })

        XCTAssertTrue(FileManager.default.createFile(atPath: scratch + "/policy.conf", contents: Data()))
        XCTAssertEqual(try bash(["netpermctl", "check", scratch + "/pol"]), [scratch + "/policy.conf"])
        XCTAssertEqual(try bash(["netpermctl", "--socket", scratch + "/p"]), [scratch + "/policy.conf"])

        XCTAssertTrue(try bash(["netpermctl", "wait", "--timeout", "30", "--", "ech"]).contains("echo"))
        // The command's own arguments: files at least (bash-completion's rules for it when installed).
        XCTAssertEqual(try bash(["netpermctl", "wait", "--", "cat", scratch + "/pol"]), [scratch + "/policy.conf"])
    }

    /// A stand-in netpermctl that prints `--terse apps` rows as the specification shapes them and notes its
    /// arguments, so app completion is tested without a daemon.
    private func stubNetpermctl() throws -> (env: [String], argsLog: String) {
        let dir = scratch + "/stub"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let log = scratch + "/stub-args"
        let script = """
            #!/bin/sh
            printf '%s\\n' "$*" >> '\(log)'
            printf '%s\\n' 'updater:no:allow:deny:allow:allow:no\\: denied on wwan' \\
              'maps:no:allow:ask:allow:allow:no\\: awaiting a decision for wwan' 'messenger:yes:allow:allow:allow:allow:yes'
            """
        try script.write(toFile: dir + "/netpermctl", atomically: true, encoding: .utf8)
        chmod(dir + "/netpermctl", 0o755)
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return (["PATH=\(dir):\(path)"], log)
    }

    func testBashCompletesAppsFromTheDaemon() throws {
        let stub = try stubNetpermctl()
        XCTAssertEqual(try bash(["netpermctl", "query", ""], env: stub.env), ["updater", "maps", "messenger"])
        XCTAssertEqual(try bash(["netpermctl", "--socket", "/tmp/np.sock", "decide", "m"], env: stub.env),
                       ["maps", "messenger"])
        XCTAssertEqual(try bash(["netpermctl", "wait", "--app", "u"], env: stub.env), ["updater"])
        XCTAssertEqual(try bash(["netpermctl", "forget", ""], env: stub.env), ["updater", "maps", "messenger"])
        XCTAssertEqual(try bash(["netpermctl", "monitor", "me"], env: stub.env), ["messenger"])
        let calls = try String(contentsOfFile: stub.argsLog, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(calls, ["--terse apps", "--socket /tmp/np.sock --terse apps", "--terse apps", "--terse apps",
                               "--terse apps"], "the --socket given on the command line is passed on")
    }

    func testBashAppCompletionIsQuietAndQuickWithoutADaemon() throws {
        let netpermctl = IntegrationTestCase.binDir + "/netpermctl"
        guard access(netpermctl, X_OK) == 0 else {
            throw HarnessError("\(netpermctl) is missing: build first (swift build) or set NETPERMD_BIN")
        }
        let start = monotonicNow()
        // The real client, pointed at a socket nobody listens on (bash() fails on any stderr output).
        XCTAssertEqual(try bash([netpermctl, "--socket", scratch + "/none.sock", "query", ""]), [])
        XCTAssertLessThan(monotonicNow() - start, 3)
    }

    // MARK: - zsh

    private func requireZsh() throws -> String {
        try Repository.requireTool("zsh", package: "zsh")
    }

    func testZshCompletionParses() throws {
        let zsh = try requireZsh()
        let r = try Subprocess.run([zsh, "-n", Self.zshDir + "/_netpermctl"])
        XCTAssertEqual(r.status, 0, r.summary)
        XCTAssertEqual(r.stdout + r.stderr, "", r.summary)
        let first = try Repository.read("completions/_netpermctl").split(separator: "\n").first
        XCTAssertEqual(first, "#compdef netpermctl", "compinit binds the function by this first line")
    }

    /// Typed into an interactive zsh (in a pseudo-terminal, with compinit and our directory in fpath): the
    /// command line and a Tab. Every candidate the completion system adds is printed on a line of its own.
    static let zshInit = """
        PROMPT='' RPROMPT=''
        fpath=($1 $fpath)
        autoload -Uz compinit && compinit -u -D
        bindkey '^I' complete-word
        zstyle ':completion:*' insert-tab false
        compadd() {
          # Calls that only compute matches (-O, -A, -D) are the completion system's own business.
          if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\\ * ]]; then builtin compadd "$@"; return; fi
          local -a __hits
          builtin compadd -A __hits "$@"
          local h; for h in $__hits; do print -r -- $'\\n<M>'$h; done
          builtin compadd "$@"
        }
        _np_done() { print -r -- $'\\n<END>'; exit }
        comppostfuncs=(_np_done)
        """
    static let zshDriver = """
        zmodload zsh/zpty || exit 2
        zpty z zsh -f -i || exit 2
        zpty -w z "source ${(q)1} ${(q)2}"
        zpty -w z "$3"$'\\t'
        local out line
        integer deadline=$(( SECONDS + 15 ))
        while (( SECONDS < deadline )); do
          if zpty -rt z line; then
            out+=$line
            [[ $out == *'<END>'* ]] && break
          else
            sleep 0.05
          fi
        done
        zpty -d z
        [[ $out == *'<END>'* ]] || { print -u2 -r -- "no <END> from the completing shell: ${(q)out}"; exit 3 }
        for line in ${(f)out//$'\\r'/}; do
          [[ $line == '<M>'* ]] && print -r -- ${line#'<M>'}
        done
        exit 0
        """

    func zsh(_ line: String, env: [String] = [], file: StaticString = #filePath, lineNo: UInt = #line) throws -> [String] {
        let zsh = try requireZsh()
        let initFile = scratch + "/init.zsh", driver = scratch + "/driver.zsh"
        if !FileManager.default.fileExists(atPath: driver) {
            try Self.zshInit.write(toFile: initFile, atomically: true, encoding: .utf8)
            try Self.zshDriver.write(toFile: driver, atomically: true, encoding: .utf8)
        }
        let r = try Subprocess.run(["env"] + env + [zsh, "-f", driver, initFile, Self.zshDir, line], timeout: 30)
        XCTAssertEqual(r.status, 0, r.summary, file: file, line: lineNo)
        return r.lines.filter { !$0.isEmpty }
    }

    func testZshCompletesForReal() throws {
        XCTAssertEqual(try zsh("netpermctl de"), ["decide", "decisions"])
        XCTAssertEqual(try zsh("netpermctl agent --n"), ["--notify"])
        XCTAssertEqual(try zsh("netpermctl ").sorted(), Self.commands.sorted())
        XCTAssertEqual(try zsh("netpermctl --json rel"), ["reload"])
        XCTAssertEqual(try zsh("netpermctl help q"), ["query"])
        XCTAssertEqual(try zsh("netpermctl --j"), ["--json"])
        XCTAssertEqual(try zsh("netpermctl links --te"), ["--terse"])
        XCTAssertEqual(try zsh("netpermctl wait ").sorted(), ["--", "--app", "--timeout"])
        XCTAssertEqual(try zsh("netpermctl decide maps ").sorted(), ["ethernet", "metered", "other", "wifi", "wwan"])
        XCTAssertEqual(try zsh("netpermctl decide maps wwan ").sorted(), ["allow", "deny"])
        XCTAssertEqual(try zsh("netpermctl decide maps wwan allow "), ["--once"])
        XCTAssertEqual(try zsh("netpermctl forget maps w").sorted(), ["wifi", "wwan"])
        XCTAssertTrue(try zsh("netpermctl links l").contains("lo"))
        XCTAssertTrue(try zsh("netpermctl wait --timeout 30 -- ech").contains("echo"))
    }

    func testZshCompletesAppsFromTheDaemon() throws {
        let stub = try stubNetpermctl()
        XCTAssertEqual(try zsh("netpermctl query ", env: stub.env).sorted(), ["maps", "messenger", "updater"])
        XCTAssertEqual(try zsh("netpermctl --socket /tmp/np.sock decide u", env: stub.env), ["updater"])
        let calls = try String(contentsOfFile: stub.argsLog, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(calls, ["--terse apps", "--socket /tmp/np.sock --terse apps"])
    }
}
