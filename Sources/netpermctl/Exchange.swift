import Glibc
import NetpermCore
import NetpermIO

/// One request, one reply: every command that asks the daemon once and prints the answer.
enum Exchange {
    /// The daemon's successful reply (its line as sent, and parsed). An error reply or a failed connection
    /// is reported here, and netpermctl exits.
    static func run(_ request: String, socketPath: String, mode: OutputMode) -> (line: String, reply: JSON) {
        let conn = Connection.open(socketPath)
        let line: String
        do {
            guard let l = try conn.request(request) else {
                die("netpermd closed the connection without answering", .unreachable)
            }
            line = l
        } catch { die("lost the connection to netpermd: \(error)", .unreachable) }

        let reply: JSON
        do { reply = try JSONParser.parse(line) } catch {
            die("unreadable reply from netpermd: \(SafeText.excerpt(line, maxBytes: 200))", .failed)
        }
        guard reply["ok"]?.boolValue == true else {
            switch mode {
            case .json:
                Output.out(line + "\n")
                exit(.failed)
            case .human, .terse:
                die("\(reply["error"]?.stringValue ?? "error"): \(reply["message"]?.stringValue ?? line)", .failed)
            }
        }
        return (line, reply)
    }
}
