// swift-tools-version:6.0
import PackageDescription

// Release links use lld: its packed relative relocations (DT_RELR, glibc >= 2.36) shrink the table the loader
// reads at start-up. Segments aligned to 64 KiB put the kernel's 64 KiB fault-around windows on the same
// boundaries as the page cache's large folios of the file (a fault maps both), so an installed binary keeps no more
// code resident than a freshly linked one. toolchain/ makes -lstdc++ pick the static archive
// (toolchain/libstdc++.so). See BENCHMARKS.md, "RSS at idle".
let toolchainDir = Context.packageDirectory + "/toolchain"
let releaseLink: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-L", toolchainDir, "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                  "-Xlinker", "-z", "-Xlinker", "max-page-size=65536"],
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
        // The syscall chokepoint, sysfs reading, the event-loop abstraction, logging.
        .target(name: "NetpermIO", dependencies: ["NetpermCore"]),
        .target(name: "NetpermNetlink", dependencies: ["CNetlink", "NetpermCore", "NetpermIO"]),
        .target(name: "NetpermSystemd", dependencies: ["CSystemd", "NetpermIO"]),
        .target(name: "NetpermControl", dependencies: ["NetpermCore", "NetpermIO"]),
        .executableTarget(
            name: "netpermd",
            dependencies: ["NetpermCore", "NetpermIO", "NetpermNetlink", "NetpermSystemd", "NetpermControl"],
            linkerSettings: releaseLink
        ),
        .executableTarget(name: "netpermctl", dependencies: ["NetpermCore", "NetpermIO"], linkerSettings: releaseLink),
        .testTarget(name: "NetpermCoreTests", dependencies: ["NetpermCore", "NetpermIO"],
                    resources: [.copy("Fixtures")]),
        // boot-systemd.sh runs as PID 1 of the real-systemd test container; the tests find it beside their sources.
        .testTarget(name: "IntegrationTests", dependencies: ["NetpermCore"], exclude: ["Support/boot-systemd.sh"]),
    ]
)
