// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import NetpermCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A man page's source, read the way these tests need it: its `.TH`, its sections, and its text with the
/// roff markup taken out (`\-\-socket` reads `--socket`).
struct ManPage {
    let file: String
    let source: String

    init(_ file: String) throws {
        self.file = file
        source = try Repository.read("man/" + file)
    }

    /// The words of the `.TH` line: title, section, date, source, manual.
    var titleLine: [String]? {
        source.split(separator: "\n").first { $0.hasPrefix(".TH ") }.map { Self.arguments(String($0.dropFirst(4))) }
    }

    /// The plain text of each `.SH` section, by its name ("OPTIONS", "SEE ALSO", ...).
    var sections: [String: String] {
        var result: [String: String] = [:]
        var current: String?
        for line in source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix(".SH ") {
                current = Self.arguments(String(line.dropFirst(4))).joined(separator: " ")
                result[current!] = ""
            } else if let name = current {
                result[name]! += Self.plain(line) + "\n"
            }
        }
        return result
    }

    /// The whole page as text, section headings included.
    var text: String {
        source.split(separator: "\n", omittingEmptySubsequences: false).map { Self.plain(String($0)) }
            .joined(separator: "\n")
    }

    /// Macro arguments: words separated by spaces, "quoted" ones kept whole.
    static func arguments(_ s: String) -> [String] {
        var words: [String] = [], word = "", quoted = false, inWord = false
        for c in s {
            if c == "\"" { quoted.toggle(); inWord = true; continue }
            if c == " " && !quoted {
                if inWord { words.append(word); word = ""; inWord = false }
                continue
            }
            word.append(c)
            inWord = true
        }
        if inWord { words.append(word) }
        return words
    }

    /// One source line as text: comments dropped, the macro name and quotes removed, escapes resolved.
    /// The font-alternating macros (`.BR \-\-socket ,`) join their arguments without spaces, as roff does.
    static func plain(_ line: String) -> String {
        if line.hasPrefix(".\\\"") { return "" }
        var s = line
        if s.hasPrefix(".") {
            let parts = s.split(separator: " ", maxSplits: 1)
            let alternating: Set<Substring> = [".BR", ".RB", ".BI", ".IB", ".IR", ".RI"]
            s = parts.count > 1
                ? arguments(String(parts[1])).joined(separator: alternating.contains(parts[0]) ? "" : " ") : ""
        }
        for (escape, text) in [("\\-", "-"), ("\\e", "\\"), ("\\(aq", "'"), ("\\(dq", "\""), ("\\(em", "--"),
                               ("\\%", ""), ("\\&", ""), ("\\c", ""), ("\\fB", ""), ("\\fI", ""), ("\\fR", ""),
                               ("\\fP", "")] {
            s = s.replacingOccurrences(of: escape, with: text)
        }
        return s
    }

    /// Whether `word` occurs in `text` as a whole word (not inside a longer option or name).
    static func contains(_ text: String, word: String) -> Bool {
        let wordChars = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-_"))
        var search = text.startIndex..<text.endIndex
        while let r = text.range(of: word, range: search) {
            let before = r.lowerBound == text.startIndex ? nil : text[text.index(before: r.lowerBound)]
            let after = r.upperBound == text.endIndex ? nil : text[r.upperBound]
            let bounded = { (c: Character?) in c.map { !$0.unicodeScalars.allSatisfy(wordChars.contains) } ?? true }
            if bounded(before) && (word.hasSuffix("=") || bounded(after)) { return true }
            search = r.upperBound..<text.endIndex
        }
        return false
    }
}

/// The man pages: lint-clean under every formatter a reader may use, named as their files, and complete
/// against the code (the daemon's options), the policy format (every key) and netpermctl's commands.
final class ManPageTests: XCTestCase {
    /// netpermctl's commands, options and exit statuses, from its specification. When `netpermctl help`
    /// lists its commands, compare this list with it.
    static let netpermctlCommands = ["status", "links", "query", "apps", "reload", "check", "monitor", "wait", "run",
                                     "prompts", "decide", "forget", "decisions", "agent", "scopes", "metrics", "usage", "report",
                                     "ping",
                                     "help"]
    static let netpermctlOptions = ["--socket", "-j", "--json", "-t", "--terse", "-h", "--help", "--version",
                                    "--app", "--timeout", "--once", "--notify", "--output"]

    private func page(_ file: String) throws -> ManPage { try ManPage(file) }

    private func run(_ argv: [String]) throws -> CommandResult {
        // A fixed UTF-8 locale: man complains on stderr about a broken one, and that is not the page's fault.
        try Subprocess.run(["env", "LC_ALL=C.UTF-8"] + argv, timeout: 30)
    }

    // MARK: - Lint

    func testGroffReportsNothing() throws {
        _ = try Repository.requireTool("groff", package: "groff-base")
        for file in Repository.manPages {
            let path = Repository.path("man/" + file)
            // The default device, and the terminal one `man` uses (it alone finds lines it cannot adjust).
            for device in [[], ["-Tutf8"], ["-Tascii"]] {
                let r = try run(["groff", "-ww", "-z", "-man"] + device + [path])
                XCTAssertEqual(r.status, 0, r.summary)
                XCTAssertEqual(r.stdout + r.stderr, "", "\(file): groff -ww \(device) warns:\n\(r.summary)")
            }
        }
    }

    func testManWarnsAboutNothing() throws {
        _ = try Repository.requireTool("man", package: "man-db")
        for file in Repository.manPages {
            let r = try run(["man", "--warnings=w", "-E", "UTF-8", "-l", "-Tutf8", "-Z", Repository.path("man/" + file)])
            XCTAssertEqual(r.status, 0, r.summary)
            XCTAssertEqual(r.stderr, "", "\(file): man --warnings reports:\n\(r.stderr)")
        }
    }

    func testMandocLintFindsNoWarning() throws {
        _ = try Repository.requireTool("mandoc", package: "mandoc")
        for file in Repository.manPages {
            // Warnings and worse; its style notes (line length, references to pages not installed here) depend
            // on taste and on the machine.
            let r = try run(["mandoc", "-Tlint", "-W", "warning", Repository.path("man/" + file)])
            XCTAssertEqual(r.status, 0, r.summary)
            XCTAssertEqual(r.stdout + r.stderr, "", "\(file): mandoc -Tlint reports:\n\(r.summary)")
        }
    }

    func testRenderedPagesFitEightyColumns() throws {
        _ = try Repository.requireTool("groff", package: "groff-base")
        for file in Repository.manPages {
            let r = try run(["groff", "-man", "-Tascii", "-P-c", "-P-b", "-P-o", "-P-u", Repository.path("man/" + file)])
            XCTAssertEqual(r.status, 0, r.summary)
            let wide = r.lines.filter { $0.count > 80 }
            XCTAssertEqual(wide, [], "\(file): lines wider than an 80-column terminal")
        }
    }

    // MARK: - Names

    func testTitleAndNameMatchTheFileName() throws {
        for file in Repository.manPages {
            let p = try page(file)
            let name = String(file[..<file.lastIndex(of: ".")!])
            let section = String(file[file.index(after: file.lastIndex(of: ".")!)...])
            guard let th = p.titleLine, th.count >= 2 else {
                XCTFail("\(file): no .TH line with a title and a section")
                continue
            }
            XCTAssertEqual(th[0], name.uppercased(), "\(file): .TH title")
            XCTAssertEqual(th[1], section, "\(file): .TH section")
            XCTAssertEqual(th.count, 5, "\(file): .TH wants title, section, date, source and manual: \(th)")
            // whatis(1) and apropos(1) read the NAME line: "name \- summary".
            let nameLine = p.sections["NAME"]?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            XCTAssertTrue(nameLine.hasPrefix(name + " - "), "\(file): NAME section is '\(nameLine)'")
        }
    }

    /// Every `man:` page the units' Documentation= names, and every page of ours SEE ALSO names, exists.
    func testReferencedPagesExist() throws {
        var references: [(from: String, page: String)] = []
        for unit in ["netpermd.service", "netpermd.socket"] {
            let text = try Repository.read("systemd/" + unit)
            for line in text.split(separator: "\n") where line.hasPrefix("Documentation=") {
                for word in line.dropFirst("Documentation=".count).split(separator: " ") where word.hasPrefix("man:") {
                    references.append((unit, String(word.dropFirst(4))))
                }
            }
        }
        for file in Repository.manPages {
            let seeAlso = try page(file).sections["SEE ALSO"] ?? ""
            for name in ["netpermd", "netpermd.conf", "netpermctl"] {
                var search = seeAlso.startIndex..<seeAlso.endIndex
                while let r = seeAlso.range(of: name + "(", range: search) {
                    let rest = seeAlso[r.upperBound...]
                    if let close = rest.firstIndex(of: ")") { references.append((file, "\(name)(\(rest[..<close]))")) }
                    search = r.upperBound..<seeAlso.endIndex
                }
            }
        }
        XCTAssertGreaterThanOrEqual(references.count, 4, "found \(references)")
        for ref in references {
            guard let open = ref.page.firstIndex(of: "("), ref.page.hasSuffix(")") else {
                XCTFail("\(ref.from): cannot read the reference \(ref.page)")
                continue
            }
            let file = "\(ref.page[..<open]).\(ref.page[ref.page.index(after: open)..<ref.page.index(before: ref.page.endIndex)])"
            XCTAssertTrue(Repository.manPages.contains(file), "\(ref.from) refers to \(ref.page), but there is no man/\(file)")
        }
    }

    // MARK: - Complete against the code and the docs

    func testDaemonPageDocumentsEveryOptionOfNetpermdHelp() throws {
        let netpermd = IntegrationTestCase.binDir + "/netpermd"
        guard access(netpermd, X_OK) == 0 else {
            throw HarnessError("\(netpermd) is missing: build first (swift build) or set NETPERMD_BIN")
        }
        let r = try Subprocess.run([netpermd, "--help"])
        XCTAssertEqual(r.status, 0, r.summary)
        let regex = try NSRegularExpression(pattern: "--[a-z][a-z-]*[a-z]")
        let help = r.stdout
        var options = Set(regex.matches(in: help, range: NSRange(help.startIndex..., in: help)).map {
            String(help[Range($0.range, in: help)!])
        })
        // --help does not list itself.
        options.insert("--help")
        XCTAssertTrue(options.isSuperset(of: ["--socket", "--config", "--state-dir", "--log-level", "--version"]),
                      "reading netpermd --help found only \(options.sorted()):\n\(help)")

        let p = try page("netpermd.8")
        let sections = p.sections
        for option in options.sorted() {
            XCTAssertTrue(ManPage.contains(sections["OPTIONS"] ?? "", word: option),
                          "netpermd.8 OPTIONS does not describe \(option)")
            XCTAssertTrue(ManPage.contains(sections["SYNOPSIS"] ?? "", word: option),
                          "netpermd.8 SYNOPSIS does not show \(option)")
        }
        for needed in ["SIGNALS", "FILES", "EXIT STATUS", "SEE ALSO"] {
            XCTAssertNotNil(sections[needed], "netpermd.8 has no \(needed) section")
        }
        for word in ["SIGHUP", "SIGTERM", "/etc/netpermd/netpermd.conf", "/var/lib/netpermd/decisions.conf",
                     "/run/netpermd/netpermd.sock", "Type=notify", "STATUS=", "WatchdogSec=", "PROTOCOL.md"] {
            XCTAssertTrue(p.text.contains(word), "netpermd.8 never mentions \(word)")
        }
    }

    /// Keys written `Key=` in config/netpermd.conf, in the key tables of docs/POLICY.md, and in
    /// docs/CLASSIFICATION.md.
    static func documentedKeys() throws -> Set<String> {
        var keys: Set<String> = []
        let keyRegex = try NSRegularExpression(pattern: "\\b([A-Z][A-Za-z]*)=")
        func scan(_ text: String) {
            for m in keyRegex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                keys.insert(String(text[Range(m.range(at: 1), in: text)!]))
            }
        }
        scan(try Repository.read("config/netpermd.conf"))
        // The key tables' rows: their first cell is a key (other tables quote keys as examples of mistakes).
        scan(try Repository.read("docs/POLICY.md").split(separator: "\n").filter { $0.hasPrefix("| `") }
            .map { $0.split(separator: "|").first.map(String.init) ?? "" }.joined(separator: "\n"))
        let classification = try Repository.read("docs/CLASSIFICATION.md")
        let backticked = try NSRegularExpression(pattern: "`([A-Z][A-Za-z]*)=")
        for m in backticked.matches(in: classification, range: NSRange(classification.startIndex..., in: classification)) {
            keys.insert(String(classification[Range(m.range(at: 1), in: classification)!]))
        }
        // What sysfs says (DEVTYPE=wlan) is not a key of ours.
        keys.remove("DEVTYPE")
        return keys
    }

    func testConfPageDocumentsEveryKeyAndSection() throws {
        let keys = try Self.documentedKeys()
        XCTAssertTrue(keys.isSuperset(of: ["WiFi", "WWAN", "Ethernet", "Other", "AdminGroup", "PromptTimeoutSec",
                                           "Executable", "Unit", "User", "Kind", "Metered", "Mode"]),
                      "reading the docs found only \(keys.sorted())")
        let text = try page("netpermd.conf.5").text
        for key in keys.sorted() {
            XCTAssertTrue(ManPage.contains(text, word: key + "="), "netpermd.conf.5 never mentions \(key)=")
        }
        for section in ["[Defaults]", "[App NAME]", "[Interface GLOB]", "[Enforcement]", "[Usage]"] {
            XCTAssertTrue(text.contains(section), "netpermd.conf.5 never mentions \(section)")
        }
        for word in ["allow", "deny", "ask", "wifi", "wwan", "ethernet", "loopback", "other",
                     "/etc/netpermd/netpermd.conf.d/", "decisions.conf", "warning", "netpermctl check"] {
            XCTAssertTrue(ManPage.contains(text, word: word), "netpermd.conf.5 never mentions \(word)")
        }
    }

    /// The lists the page and completion tests use are netpermctl's own: every command `netpermctl help` lists,
    /// and every option word it prints, and nothing else.
    func testCommandAndOptionListsAreWhatNetpermctlHelpSays() throws {
        let bin = IntegrationTestCase.binDir + "/netpermctl"
        let help = try Subprocess.check([bin, "help"]).lines
        let start = try XCTUnwrap(help.firstIndex(of: "commands:"), help.joined(separator: "\n"))
        let commands = help[(start + 1)...].prefix { !$0.isEmpty }
            .filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .compactMap { $0.split(separator: " ").first.map(String.init) }
        XCTAssertEqual(commands, Self.netpermctlCommands)
        let separators: Set<Character> = [" ", ",", "[", "]", "|", "(", ")"]
        let tokens: [String] = help.joined(separator: " ").split(whereSeparator: { separators.contains($0) }).map(String.init)
        let optionTokens = tokens.filter { $0.hasPrefix("-") && $0.count > 1 && $0 != "--" }
        let words = Set(optionTokens.map { $0.hasSuffix(".") ? String($0.dropLast()) : $0 })
        XCTAssertEqual(words, Set(Self.netpermctlOptions))
    }

    /// Issue 23: `help query` and the pages listed every reason but routed-elsewhere. Each reason a verdict can
    /// give is named where admins look: `netpermctl help query` (-t's reason field) and both pages.
    func testEveryReasonIsNamedByTheHelpAndThePages() throws {
        let help = try Subprocess.check([IntegrationTestCase.binDir + "/netpermctl", "help", "query"]).stdout
        let reasons = try XCTUnwrap(help.split(separator: "\n").first { $0.hasPrefix("reason is ") }, help)
        for reason in Verdict.Reason.allCases {
            XCTAssertTrue(ManPage.contains(String(reasons), word: reason.rawValue), "help query: \(reasons)")
            // A man page says "yes" for ok.
            guard reason != .ok else { continue }
            for file in ["netpermctl.1", "netpermd.8"] {
                XCTAssertTrue(ManPage.contains(try page(file).text, word: reason.rawValue),
                              "\(file) never names the reason \(reason.rawValue)")
            }
        }
    }

    func testCtlPageDocumentsEveryCommandOptionAndExitStatus() throws {
        let p = try page("netpermctl.1")
        let sections = p.sections
        let commands = try XCTUnwrap(sections["COMMANDS"], "netpermctl.1 has no COMMANDS section")
        // Each command starts a line of its own there (a .TP tag).
        let tags = Set(commands.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) })
        for command in Self.netpermctlCommands {
            XCTAssertTrue(tags.contains(command), "netpermctl.1 COMMANDS does not describe \(command)")
        }
        for option in Self.netpermctlOptions {
            XCTAssertTrue(ManPage.contains(p.text, word: option), "netpermctl.1 never mentions \(option)")
        }
        let exit = sections["EXIT STATUS"] ?? ""
        for code in 0...6 {
            XCTAssertTrue(exit.split(separator: "\n").contains(Substring(String(code))),
                          "netpermctl.1 EXIT STATUS does not explain \(code)")
        }
        XCTAssertTrue((sections["ENVIRONMENT"] ?? "").contains("NETPERMD_SOCKET"))
        let examples = sections["EXAMPLES"] ?? ""
        for example in ["ExecStartPre=", "netpermctl query", "--terse links"] {
            XCTAssertTrue(examples.contains(example), "netpermctl.1 EXAMPLES has no \(example)")
        }
    }
}
