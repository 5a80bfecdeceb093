// SPDX-License-Identifier: LGPL-2.1-or-later
import Foundation
import NetpermCore
import NetpermHost
import NetpermPolicy
import NetpermProtocol
import XCTest

/// Stacked links on real-shaped sysfs trees: each link's own facts are read by the daemon's `Sysfs` reader and
/// classified by the built-in rules, what netlink says of the stacking (IFLA_LINK, IFLA_MASTER) is given by the
/// test and checked against the tree's own record of it (`lower_*`, `brif/`, `bonding/slaves`), then the
/// stacking pass runs as in the engine.
final class StackingFixtureTests: XCTestCase {
    private func root(_ name: String) throws -> String {
        // Beside this source: the target excludes the trees (see ClassificationTests).
        let base = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
        let path = base.appendingPathComponent("sysfs-stack-\(name)").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: path), "no fixture \(path)")
        return path
    }

    private func facts(_ index: Int32, _ name: String, kind: String? = nil, lower: Int32? = nil,
                       master: Int32? = nil, arphrd: UInt32 = ARPHRD.ether) -> LinkFacts {
        LinkFacts(index: index, name: name, arphrd: arphrd, rtnlKind: kind, adminUp: true, carrier: true,
                  operstate: "up", lowerIndex: lower, masterIndex: master)
    }

    /// The network the engine would build from these links on this tree.
    private func network(_ fixture: String, _ links: [LinkFacts], overrides: [InterfaceOverride] = [],
                         file: StaticString = #filePath, line: UInt = #line) throws -> NetworkState {
        let r = try root(fixture)
        let sysfs = Sysfs(root: r)
        let byIndex = Dictionary(uniqueKeysWithValues: links.map { ($0.index, $0.name) })
        for l in links {
            let dir = "\(r)/class/net/\(l.name)"
            // The tree and the test's netlink facts must tell the same story.
            let type = try String(contentsOfFile: "\(dir)/type", encoding: .utf8)
            XCTAssertEqual(UInt32(type.trimmingCharacters(in: .whitespacesAndNewlines)), l.arphrd, "\(l.name) type",
                           file: file, line: line)
            let uevent = try String(contentsOfFile: "\(dir)/uevent", encoding: .utf8)
            XCTAssertTrue(uevent.contains("IFINDEX=\(l.index)\n"), "\(l.name) ifindex", file: file, line: line)
            if let lower = l.lowerIndex, let name = byIndex[lower] {
                XCTAssertTrue(FileManager.default.fileExists(atPath: "\(dir)/lower_\(name)"),
                              "\(l.name): the tree has no lower_\(name)", file: file, line: line)
            }
            if let master = l.masterIndex, let name = byIndex[master] {
                let m = "\(r)/class/net/\(name)"
                let slaves = (try? String(contentsOfFile: "\(m)/bonding/slaves", encoding: .utf8)) ?? ""
                XCTAssertTrue(FileManager.default.fileExists(atPath: "\(m)/brif/\(l.name)")
                              || slaves.split(whereSeparator: \.isWhitespace).contains(Substring(l.name)),
                              "\(l.name): \(name) does not list it as a port", file: file, line: line)
            }
        }
        return NetworkState(snapshot: KernelSnapshot(links: links), overrides: overrides) { f in
            Classifier.classify(f, sysfs: sysfs.facts(forInterface: f.name), overrides: overrides)
        }
    }

    private func check(_ s: NetworkState, _ name: String, _ kind: LinkKind, _ by: String, metered: Bool,
                       over: String?, file: StaticString = #filePath, line: UInt = #line) throws {
        let l = try XCTUnwrap(s.link(named: name), file: file, line: line)
        XCTAssertEqual(l.kind, kind, "\(name) kind", file: file, line: line)
        XCTAssertEqual(l.classifiedBy, by, "\(name) classified_by", file: file, line: line)
        XCTAssertEqual(l.metered, metered, "\(name) metered", file: file, line: line)
        XCTAssertEqual(l.over, over, "\(name) over", file: file, line: line)
    }

    func testVlanOnE1000e() throws {
        let s = try network("vlan", [facts(2, "enp3s0"), facts(5, "enp3s0.10", kind: "vlan", lower: 2)])
        try check(s, "enp3s0", .ethernet, "arphrd:ether", metered: false, over: nil)
        try check(s, "enp3s0.10", .ethernet, "lower:enp3s0", metered: false, over: "enp3s0")
    }

    func testBondOfTwoNics() throws {
        let s = try network("bond", [facts(2, "enp3s0", master: 6), facts(3, "enp4s0", master: 6),
                                     facts(6, "bond0", kind: "bond")])
        try check(s, "bond0", .ethernet, "ports:enp3s0,enp4s0", metered: false, over: "enp3s0")
    }

    /// A VM host's uplink: the bridge holding the wired NIC and a guest's tap is wired.
    func testBridgeWithWiredPort() throws {
        let s = try network("bridge-wired", [facts(2, "enp3s0", master: 7), facts(7, "br0", kind: "bridge"),
                                             facts(8, "vnet0", kind: "tun", master: 7)])
        try check(s, "vnet0", .other, "rtnl-kind:tun", metered: false, over: nil)
        try check(s, "br0", .ethernet, "ports:enp3s0,vnet0", metered: false, over: "enp3s0")
    }

    func testBridgeWithWlan() throws {
        let s = try network("bridge-wlan", [facts(2, "enp3s0", master: 7), facts(3, "wlp2s0", master: 7),
                                            facts(7, "br0", kind: "bridge")])
        try check(s, "wlp2s0", .wifi, "sysfs:devtype=wlan", metered: false, over: nil)
        try check(s, "br0", .wifi, "ports:enp3s0,wlp2s0", metered: false, over: "wlp2s0")
    }

    func testMacvlanOnWwanModem() throws {
        let s = try network("macvlan-wwan", [facts(6, "wwan0"), facts(9, "mv0", kind: "macvlan", lower: 6)])
        try check(s, "wwan0", .wwan, "sysfs:devtype=wwan", metered: true, over: nil)
        try check(s, "mv0", .wwan, "lower:wwan0", metered: true, over: "wwan0")
    }

    /// `[Interface mv0] Kind=ethernet` is explicit and wins; `Metered=no` alone keeps the inherited kind.
    func testOverridesOnTheStackedLink() throws {
        let links = [facts(6, "wwan0"), facts(9, "mv0", kind: "macvlan", lower: 6)]
        let kind = try network("macvlan-wwan", links, overrides: [InterfaceOverride(glob: try Glob("mv0"), kind: .ethernet, metered: nil)])
        try check(kind, "mv0", .ethernet, "config:[Interface mv0]", metered: false, over: nil)
        let metered = try network("macvlan-wwan", links, overrides: [InterfaceOverride(glob: try Glob("mv*"), kind: nil, metered: false)])
        try check(metered, "mv0", .wwan, "lower:wwan0", metered: false, over: "wwan0")
    }
}
