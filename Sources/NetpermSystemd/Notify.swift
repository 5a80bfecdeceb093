// SPDX-License-Identifier: LGPL-2.1-or-later
import CSystemd
import Glibc
import NetpermIO

/// sd_notify(3): a no-op when NOTIFY_SOCKET is unset, so the daemon calls it unconditionally.
public enum Notify {
    public static func send(_ fields: String) {
        _ = sd_notify(0, fields)
    }
}

/// Socket activation: the listening socket systemd passed, if any.
public enum Activation {
    /// The passed stream socket to use (named `preferredName` if names were given); every other passed
    /// descriptor is closed. Nil when the daemon was not socket-activated.
    public static func listeningSocket(preferredName: String) -> Int32? {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let n = sd_listen_fds_with_names(1, &names)
        guard n > 0 else { return nil }
        defer {
            if let names {
                for i in 0..<Int(n) { free(names[i]) }
                free(names)
            }
        }
        var chosen: Int32?
        for i in 0..<n {
            let fd = SD_LISTEN_FDS_START + i
            let name = names?[Int(i)].map { String(cString: $0) } ?? ""
            let usable = sd_is_socket_unix(fd, Int32(SOCK_STREAM.rawValue), 1, nil, 0) > 0
            if usable && (chosen == nil || name == preferredName) {
                if let old = chosen { FD.close(old) }
                chosen = fd
            } else {
                Log.warning("closing unexpected descriptor \(fd) (\(name.isEmpty ? "unnamed" : name)) from the service manager")
                FD.close(fd)
            }
        }
        return chosen
    }
}
