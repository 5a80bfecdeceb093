import NetpermCore
import NetpermIO

/// Reads the sysfs facts the classifier needs. The root is injectable so tests run on fixture trees.
public struct Sysfs: Sendable {
    public let root: String

    public init(root: String = "/sys") { self.root = root }

    public func facts(forInterface name: String) -> SysfsFacts {
        let dir = "\(root)/class/net/\(name)"
        var devtype: String?
        if let uevent = FD.readText("\(dir)/uevent") {
            for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
                devtype = String(line.dropFirst("DEVTYPE=".count))
            }
        }
        return SysfsFacts(devtype: devtype, hasPhy80211: FD.exists("\(dir)/phy80211"),
                          hasWireless: FD.exists("\(dir)/wireless"))
    }
}
