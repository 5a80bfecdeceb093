// swift-tools-version:6.0
import PackageDescription

// Release links use lld: its packed relative relocations (DT_RELR, glibc >= 2.36) shrink the table the loader
// reads at start-up, and it can lay functions out in the order of link/netpermd.order (the functions a typical
// session runs, from `make orderfile`), so the code a running daemon needs shares few pages. link/ also makes
// -lstdc++ pick the static archive. Together these take idle RSS from 9.5 to about 7 MiB (BENCHMARKS.md).
let linkDir = Context.packageDirectory + "/link"
let releaseLink: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-L", linkDir, "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"],
                 .when(configuration: .release)),
]

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
        .systemLibrary(
            name: "CNetlink",
            pkgConfig: "libnl-route-3.0",
            providers: [.apt(["libnl-3-dev", "libnl-route-3-dev"])]
        ),
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        // Pure core: no C modules, no I/O.
        .target(name: "NetpermCore"),
        // Syscall plumbing: the chokepoint, descriptors, files, Unix sockets, the event-loop protocol, logging.
        .target(name: "NetpermIO", dependencies: ["CLinux"]),
        // The host as the core sees it: peer identity, sysfs, config files, accounts, the decision store.
        .target(name: "NetpermHost", dependencies: ["NetpermCore", "NetpermIO"]),
        .target(name: "NetpermNetlink", dependencies: ["CNetlink", "NetpermCore", "NetpermIO"]),
        .target(name: "NetpermSystemd", dependencies: ["CSystemd", "NetpermIO"]),
        // The control socket's transport: client ids and bytes, no core types.
        .target(name: "NetpermControl", dependencies: ["NetpermIO"]),
        .executableTarget(
            name: "netpermd",
            dependencies: ["NetpermCore", "NetpermIO", "NetpermHost", "NetpermNetlink", "NetpermSystemd",
                           "NetpermControl"],
            linkerSettings: releaseLink + [
                .unsafeFlags(["-Xlinker", "--symbol-ordering-file=\(linkDir)/netpermd.order",
                              "-Xlinker", "--no-warn-symbol-ordering"], .when(configuration: .release)),
            ]
        ),
        .executableTarget(name: "netpermctl", dependencies: ["NetpermCore", "NetpermIO", "NetpermHost"],
                          linkerSettings: releaseLink),
        .testTarget(name: "NetpermCoreTests", dependencies: ["NetpermCore", "NetpermHost", "CLinux"],
                    resources: [.copy("Fixtures")]),
        // The transport on a test loop: back-pressure, held requests, framing (real sockets, no daemon).
        .testTarget(name: "NetpermControlTests", dependencies: ["NetpermControl", "NetpermIO"]),
        // boot-systemd.sh runs as PID 1 of the real-systemd test container; the tests find it beside their sources.
        .testTarget(name: "IntegrationTests", dependencies: ["NetpermCore"], exclude: ["Support/boot-systemd.sh"]),
    ]
)
