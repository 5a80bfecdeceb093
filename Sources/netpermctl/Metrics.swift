// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermIO
import NetpermProtocol

/// `netpermctl metrics [--output FILE]`: the daemon's METRICS text, printed or written for node_exporter's textfile
/// collector, which reads every `*.prom` file of its directory at each scrape: the text goes to FILE.tmp first and
/// is renamed over FILE, so a scrape sees the last whole file or this one, never a torn one.
enum Metrics {
    static func run(socketPath: String, output: String?, mode: OutputMode) -> Never {
        let (line, reply) = Exchange.run("METRICS", socketPath: socketPath, mode: mode)
        guard let text = reply["metrics"]?.stringValue else {
            die("the daemon's METRICS reply has no metrics member: \(SafeText.excerpt(line, maxBytes: 200))", .failed)
        }
        if let output {
            do { try AtomicFile.write(output, text, mode: 0o644) } catch { die("cannot write \(output): \(error)", .failed) }
            exit(.ok)
        }
        // The daemon wrote the text from names, numbers and the policy's app ids (letters, digits, '-', '_', '.'):
        // printed as it is, as the format's own escapes must stay.
        Output.out(mode == .json ? line + "\n" : text)
        exit(.ok)
    }
}
