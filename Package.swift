// swift-tools-version:6.0
// SPDX-License-Identifier: LGPL-2.1-or-later
import PackageDescription

// Release links use lld: its packed relative relocations (DT_RELR, glibc >= 2.36) shrink the table the loader
// reads at start-up. Segments aligned to 64 KiB put the kernel's 64 KiB fault-around windows on the same
// boundaries as the page cache's large folios of the file (a fault maps both), so an installed binary keeps no more
// code resident than a freshly linked one. toolchain/ makes -lstdc++ pick the static archive
// (toolchain/libstdc++.so). toolchain/rodata.ld keeps the read-only data read-only (the compiler marks some of its
// input sections writable). See BENCHMARKS.md, "RSS at idle" and issue 52.
let toolchainDir = Context.packageDirectory + "/toolchain"
let releaseLink: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-L", toolchainDir, "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                  "-Xlinker", "-z", "-Xlinker", "max-page-size=65536", "-Xlinker", "-T", "-Xlinker", toolchainDir + "/rodata.ld"],
                 .when(configuration: .release)),
]

// The pure modules below the engine are optimized with it: their code is inlined and specialized where the engine
// calls it (permissions, decisions, JSON), as when they were one module; without it a reload of 10,001 apps spent a
// quarter more on the loop in the verdicts' tracker.
let crossModule: [SwiftSetting] = [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]

let package = Package(
    name: "netpermd",
    products: [
        .executable(name: "netpermd", targets: ["netpermd"]),
        .executable(name: "netpermctl", targets: ["netpermctl"]),
    ],
    targets: [
        // One module per C library; each is imported by exactly one Swift module.
        // CLinux: the kernel's and glibc's headers Swift's Glibc module leaves out (constants, struct ucred).
        .systemLibrary(name: "CLinux"),
        // CNetlink: libnl's core, route and genl (nl80211) parts, one library family, linked by the modulemap.
        .systemLibrary(
            name: "CNetlink",
            pkgConfig: "libnl-route-3.0",
            providers: [.apt(["libnl-3-dev", "libnl-route-3-dev", "libnl-genl-3-dev"])]
        ),
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // libnftables' header and the netfilter netlink constants; the library itself is loaded with dlopen when
        // enforcement first needs it (NetpermNftables), so it is not linked.
        .systemLibrary(name: "CNftables", providers: [.apt(["libnftables-dev"])]),
        // The control socket's protocol, what netpermd and its clients share: verbs, requests, error codes, event
        // names, JSON reading and writing, the wire's vocabulary (kinds, permissions, prompt choices). Pure, no
        // dependencies.
        .target(name: "NetpermProtocol", swiftSettings: crossModule),
        // The policy's language: the config parser (ini, globs, [App]s, drop-ins' merging), app ids and matching
        // peers to apps, run scopes' names. Pure: what netpermctl check needs without the engine.
        .target(name: "NetpermPolicy", dependencies: ["NetpermProtocol"], swiftSettings: crossModule),
        // Reading the policy from the host: the config file with its drop-ins, user and group names (NSS).
        .target(name: "NetpermPolicyFiles", dependencies: ["NetpermPolicy", "NetpermIO"]),
        // Pure core: the engine, no C modules, no I/O.
        .target(name: "NetpermCore", dependencies: ["NetpermProtocol", "NetpermPolicy"]),
        // Syscall plumbing: the chokepoint, descriptors, files, Unix sockets, the event-loop protocol, logging.
        .target(name: "NetpermIO", dependencies: ["CLinux"]),
        // The host as the core sees it: peer identity, sysfs, config files, accounts, the decision store.
        .target(name: "NetpermHost", dependencies: ["NetpermCore", "NetpermPolicy", "NetpermPolicyFiles",
                                                 "NetpermProtocol", "NetpermIO"]),
        .target(name: "NetpermNetlink", dependencies: ["CNetlink", "NetpermCore", "NetpermProtocol", "NetpermIO"]),
        .target(name: "NetpermSystemd", dependencies: ["CSystemd", "NetpermIO", "NetpermProtocol"]),
        // Enforcement's edge: one libnftables context (scripts as transactions) and the nftables event socket.
        .target(name: "NetpermNftables", dependencies: ["CNftables", "NetpermCore", "NetpermProtocol", "NetpermIO"]),
        // Steering's program (Mode=steer): assembled in Swift, loaded with bpf(2) through NetpermIO's chokepoint.
        .target(name: "NetpermBPF", dependencies: ["NetpermIO"]),
        // The control socket's transport: client ids and bytes, no core types.
        .target(name: "NetpermControl", dependencies: ["NetpermIO"]),
        // The daemon's logic around the engine: the interpreter of its effects and the edges' adapters (rules,
        // steering, cgroups, policy reloads), unit-tested on a test loop; `netpermd` is only its wiring.
        .target(
            name: "NetpermDaemon",
            dependencies: ["NetpermCore", "NetpermProtocol", "NetpermPolicy", "NetpermPolicyFiles", "NetpermIO",
                           "NetpermHost", "NetpermNetlink", "NetpermSystemd", "NetpermControl", "NetpermNftables",
                           "NetpermBPF"]
        ),
        .executableTarget(
            name: "netpermd",
            dependencies: ["NetpermDaemon", "NetpermCore", "NetpermIO", "NetpermHost", "NetpermNetlink", "NetpermSystemd",
                           "NetpermControl"],
            linkerSettings: releaseLink
        ),
        // The protocol's client, without the engine: NetpermPolicy and NetpermPolicyFiles for `check`, NetpermSystemd
        // for `run`'s transient scope over sd-bus.
        .executableTarget(name: "netpermctl", dependencies: ["NetpermProtocol", "NetpermPolicy", "NetpermPolicyFiles",
                                                             "NetpermIO", "NetpermSystemd"],
                          linkerSettings: releaseLink),
        // Fixtures are sysfs-shaped trees with symlinks (some to /dev paths that only name things): the tests read
        // them where they are, beside their source, rather than from a copy SwiftPM makes.
        // What the tests share: the test event loop, a clock that moves only when told, and the world around the
        // engine (connections, timers, the store, the kernel's answers) that the engine fuzz target plays too (it
        // compiles FakeClock.swift and FakeWorld.swift with its own).
        .target(name: "TestSupport", dependencies: ["NetpermCore", "NetpermProtocol", "NetpermPolicy", "NetpermIO",
                                                    "NetpermControl"], path: "Tests/TestSupport"),
        .testTarget(name: "NetpermCoreTests", dependencies: ["NetpermCore", "NetpermProtocol", "NetpermPolicy", "NetpermHost",
                                                          "CLinux", "TestSupport"],
                    exclude: ["Fixtures"]),
        // Kernel messages (rtnetlink, nl80211, NFLOG) read from bytes built by the tests: no Wi-Fi hardware on the
        // test machines; and nf_tables' own answers to the nftables monitor, in a network namespace of the test's own.
        .testTarget(name: "NetpermNetlinkTests", dependencies: ["NetpermNetlink", "NetpermCore", "NetpermProtocol",
                                                                "NetpermNftables", "NetpermIO", "CLinux", "TestSupport"]),
        // The daemon library on a test loop with fake edges: the interpreter's effects, its store, slow policies.
        .testTarget(name: "NetpermDaemonTests", dependencies: ["NetpermDaemon", "NetpermCore", "NetpermProtocol", "NetpermPolicy",
                                                               "NetpermPolicyFiles", "NetpermHost", "NetpermIO",
                                                               "NetpermControl", "TestSupport"]),
        // The steering program's bytes, and loading it (as root) into the test's own namespace.
        .testTarget(name: "NetpermBPFTests", dependencies: ["NetpermBPF", "NetpermIO"]),
        // Syscall plumbing that can be tested in-process (releasing code pages).
        .testTarget(name: "NetpermIOTests", dependencies: ["NetpermIO"]),
        // The bus edge's pure pieces: calls bounded in flight, refusals tried again.
        .testTarget(name: "NetpermSystemdTests", dependencies: ["NetpermSystemd"]),
        // The transport on a test loop: back-pressure, held requests, framing (real sockets, no daemon).
        .testTarget(name: "NetpermControlTests", dependencies: ["NetpermControl", "NetpermIO", "TestSupport"]),
        // boot-systemd.sh runs as PID 1 of the real-systemd test container, glib-app.py is the GLib app of the GLib
        // module's tests, hostile-user.py the soak's users; the tests find them beside their sources.
        .testTarget(name: "IntegrationTests", dependencies: ["NetpermCore", "NetpermProtocol", "NetpermPolicy"],
                    exclude: ["Support/boot-systemd.sh", "Support/glib-app.py", "Support/notifications.py",
                              "Support/hostile-user.py", "Support/slow-notifications.py", "Support/first-refused.py",
                              "Support/settings-driver.py", "Support/modemmanager.py", "Support/fake-netpermd.py",
                              "Support/settings-timed.py", "Support/settings-unit.py", "Support/polkit-agent.py"]),
    ]
)
