import CSystemd

/// sd_notify(3): a no-op when NOTIFY_SOCKET is unset, so the daemon calls it unconditionally.
public enum Notify {
    public static func send(_ fields: String) {
        _ = sd_notify(0, fields)
    }
}
