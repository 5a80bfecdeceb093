// SPDX-License-Identifier: LGPL-2.1-or-later
import NetpermCore
import NetpermIO

/// Reads what the classifier needs about a link: its device in sysfs, what carries a PPP unit (/proc, pppd's pid
/// file under /run) and what systemd-networkd recorded of its DHCP lease (/run). The roots are injectable so tests
/// run on fixture trees. A few reads and readlinks per link; nothing here is on the per-message path.
public struct Sysfs: Sendable {
    public let root: String
    public let proc: String
    public let run: String

    public init(root: String = "/sys", proc: String = "/proc", run: String = "/run") {
        self.root = root; self.proc = proc; self.run = run
    }

    /// `index` is the ifindex, which names systemd-networkd's lease file; without it the lease is not read.
    public func facts(forInterface name: String, index: Int32? = nil) -> SysfsFacts {
        let dir = "\(root)/class/net/\(name)"
        var f = SysfsFacts(hasPhy80211: FD.exists("\(dir)/phy80211"), hasWireless: FD.exists("\(dir)/wireless"))
        if let uevent = FD.readText("\(dir)/uevent") {
            for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
                f.devtype = String(line.dropFirst("DEVTYPE=".count))
            }
        }
        f.driver = linkName("\(dir)/device/driver")
        f.bus = linkName("\(dir)/device/subsystem")
        if f.bus == "usb" {
            // device is the USB interface (1-4:1.4); its parent directory is the USB device with the vendor id.
            if let c = hexByte("\(dir)/device/bInterfaceClass"), let s = hexByte("\(dir)/device/bInterfaceSubClass"),
               let p = hexByte("\(dir)/device/bInterfaceProtocol") {
                f.usbInterface = USBInterfaceClass(c, s, p)
            }
            f.usbVendor = FD.readText("\(dir)/device/../idVendor").flatMap { UInt16(trimmed($0), radix: 16) }
        }
        if f.devtype == "ppp" || name.hasPrefix("ppp") { f.pppChannel = pppChannel(unit: name) }
        if let index { f.dhcpAndroidMetered = NetworkdLease(run: run).androidMetered(ifindex: index) }
        return f
    }

    /// What carries PPP unit `unit`: an L2TP session names its unit in /proc/net/pppol2tp; otherwise pppd's pid
    /// file (/run/UNIT.pid) gives its process, whose descriptors show a tty (a modem), a pty (PPTP, PPP over SSH)
    /// or neither (a socket: PPPoE when /proc/net/pppoe lists a session).
    func pppChannel(unit: String) -> PPPChannel? {
        if let l2tp = FD.readText("\(proc)/net/pppol2tp"),
           l2tp.split(separator: "\n").contains(where: { trimmed(String($0)) == "interface \(unit)" }) {
            return .l2tp
        }
        guard let pidText = FD.readText("\(run)/\(unit).pid"),
              let pid = Int32(trimmed(String(pidText.split(separator: "\n").first ?? ""))) else { return nil }
        let fdDir = "\(proc)/\(pid)/fd"
        let targets = ((try? Files.list(fdDir)) ?? []).compactMap { try? Files.readLink("\(fdDir)/\($0)") }
        if targets.contains(where: { $0.hasPrefix("/dev/pts/") || $0 == "/dev/ptmx" }) { return .pty }
        if let tty = targets.first(where: Self.isModemPort) { return .tty(tty) }
        let sessions = PPPoESessions.parse(FD.readText("\(proc)/net/pppoe") ?? "")
        guard !sessions.isEmpty else { return nil }
        // pppd names the NIC on its command line (`nic-eth0` or a bare `eth0` after `plugin pppoe.so`).
        let args = (FD.readText("\(proc)/\(pid)/cmdline") ?? "").split(separator: "\0").map(String.init)
        let named = sessions.first { dev in args.contains(dev) || args.contains("nic-\(dev)") }
        return .pppoe(device: named ?? (sessions.count == 1 ? sessions[0] : nil))
    }

    /// Serial ports modems expose: USB serial (option, qcserial), CDC-ACM, Sierra/Huawei HS, the WWAN framework's
    /// AT ports, MHI's, and a plain UART.
    static func isModemPort(_ path: String) -> Bool {
        ["/dev/ttyUSB", "/dev/ttyACM", "/dev/ttyHS", "/dev/wwan", "/dev/ttyMHI", "/dev/ttyS", "/dev/ttyAMA",
         "/dev/ttyGS", "/dev/rfcomm"].contains { path.hasPrefix($0) }
    }

    private func linkName(_ path: String) -> String? {
        guard let target = try? Files.readLink(path) else { return nil }
        return Files.name(of: target)
    }

    private func hexByte(_ path: String) -> UInt8? {
        FD.readText(path).flatMap { UInt8(trimmed($0), radix: 16) }
    }
}

/// /proc/net/pppoe: a header, then `SID REMOTE-MAC DEVICE` per session.
enum PPPoESessions {
    static func parse(_ text: String) -> [String] {
        text.split(separator: "\n").dropFirst().compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            return fields.count == 3 ? String(fields[2]) : nil
        }
    }
}

private func trimmed(_ s: String) -> String {
    var t = Substring(s)
    while let c = t.first, c == " " || c == "\n" || c == "\t" { t = t.dropFirst() }
    while let c = t.last, c == " " || c == "\n" || c == "\t" { t = t.dropLast() }
    return String(t)
}
