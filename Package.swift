// swift-tools-version:6.0
import PackageDescription

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
            dependencies: ["NetpermCore", "NetpermIO", "NetpermNetlink", "NetpermSystemd", "NetpermControl"]
        ),
        .executableTarget(name: "netpermctl", dependencies: ["NetpermCore", "NetpermIO"]),
        .testTarget(name: "NetpermCoreTests", dependencies: ["NetpermCore", "NetpermIO"],
                    resources: [.copy("Fixtures")]),
        .testTarget(name: "IntegrationTests", dependencies: ["NetpermCore"]),
    ]
)
