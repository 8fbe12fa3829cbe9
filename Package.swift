// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "securepush",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "securepush", targets: ["securepush"]),
        .library(name: "PushWire", targets: ["PushWire"]),
        .library(name: "PushEventLoop", targets: ["PushEventLoop"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // libevent (and its OpenSSL bufferevents) from Debian's libevent-dev and libssl-dev.
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent_openssl",
            providers: [.apt(["libevent-dev", "libssl-dev"])]
        ),
        // The wire codec: frames, fields, messages, the incremental decoder. No I/O.
        .target(name: "PushWire"),
        // The only importer of CLibevent.
        .target(name: "PushEventLoop", dependencies: ["CLibevent", "PushWire"]),
        .executableTarget(
            name: "securepush",
            dependencies: [
                "PushWire", "PushEventLoop",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "PushWireTests", dependencies: ["PushWire"]),
        .testTarget(name: "PushEventLoopTests", dependencies: ["PushEventLoop", "PushWire"]),
    ]
)
