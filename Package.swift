// swift-tools-version:6.2
// livegate — a host daemon that brings a cloud backend's live data to every local process.
// Licensed under the Apache License, Version 2.0.

import PackageDescription

/// A product of a package that only the daemon, the cloud, the engine and the tools use: resolved with the `Server`
/// trait only (a default trait), so an app that depends on this package for `LiveGateClient` with `traits: []`
/// resolves swift-nio and what it needs, nothing of the server (README, "Using the Swift client in an app").
func server(_ product: String, _ package: String) -> Target.Dependency {
    .product(name: product, package: package, condition: .when(traits: ["Server"]))
}

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

/// The test targets' own code is compiled unoptimized in the release configuration too: the suite runs on the release build
/// (`scripts/test`), where optimizing the tests themselves would only slow their compile; the modules they test are
/// optimized as they ship.
let testSettings: [SwiftSetting] = swiftSettings + [.unsafeFlags(["-Onone"], .when(configuration: .release))]

let package = Package(
    name: "livegate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "livegated", targets: ["livegated"]),
        .executable(name: "livegatectl", targets: ["livegatectl"]),
        .executable(name: "livegate-cloud", targets: ["livegate-cloud"]),
        .library(name: "LiveSDK", targets: ["LiveSDK"]),
        .library(name: "LiveGateClient", targets: ["LiveGateClient"]),
        .library(name: "LiveGateProtocol", targets: ["LiveGateProtocol"]),
    ],
    traits: [
        .trait(name: "Server", description: "The daemon, the cloud, the engine and the tools (the default): their dependencies."),
        .default(enabledTraits: ["Server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/hummingbird-project/swift-websocket.git", from: "1.6.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth.git", from: "2.5.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
    ],
    targets: [
        // C interop: system libraries, wrapped by Swift targets below.
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CJSONC", pkgConfig: "json-c", providers: [.apt(["libjson-c-dev"])]),

        // Wire formats.
        .target(name: "LiveGateVersion", swiftSettings: swiftSettings),
        .target(name: "LiveJSON", swiftSettings: swiftSettings),
        .target(name: "LiveChangeSet", swiftSettings: swiftSettings),
        .target(
            name: "LiveGateProtocol",
            dependencies: ["LiveJSON", "LiveChangeSet", "LiveGateVersion", .product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: swiftSettings
        ),
        .target(name: "LiveCloudAPI", dependencies: ["LiveJSON"], swiftSettings: swiftSettings),
        // Event loops as task executors (the engine's loop, the cloud's PostgreSQL write transactions).
        .target(name: "LiveEventLoops", dependencies: [.product(name: "NIOCore", package: "swift-nio")], swiftSettings: swiftSettings),
        // What a long-running livegate process does for itself: give freed memory back once it goes idle (the
        // daemon, the cloud).
        .target(
            name: "LiveProcess",
            dependencies: [server("ServiceLifecycle", "swift-service-lifecycle"), server("Logging", "swift-log")],
            swiftSettings: swiftSettings
        ),
        // SQLite's WAL checkpointed beside its writer (the engine's cache, the cloud's store).
        .target(
            name: "LiveSQLite",
            dependencies: [server("GRDB", "GRDB.swift"), server("Logging", "swift-log")],
            swiftSettings: swiftSettings
        ),

        // The engine.
        .target(
            name: "LiveSDK",
            dependencies: [
                "LiveCloudAPI", "LiveJSON", "LiveChangeSet", "LiveSQLite", "LiveEventLoops",
                server("GRDB", "GRDB.swift"),
                // SQLite's C interface, for the one statement the engine binds itself (`CacheStore.upsert`).
                server("GRDBSQLite", "GRDB.swift"),
                server("AsyncHTTPClient", "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                server("WSClient", "swift-websocket"),
                server("Logging", "swift-log"),
                server("HTTPTypes", "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // systemd glue.
        .target(
            name: "LiveGateSystemd",
            dependencies: ["CSystemd", server("Logging", "swift-log")],
            swiftSettings: swiftSettings
        ),

        // The daemon's configuration file and access policy (a target of their own: the fuzzer builds it alone).
        .target(
            name: "LiveGateConfig",
            dependencies: [server("Logging", "swift-log")],
            swiftSettings: swiftSettings
        ),

        // The daemon.
        .target(
            name: "LiveGateDaemon",
            dependencies: [
                "LiveGateConfig", "LiveGateProtocol", "LiveSDK", "LiveGateSystemd", "LiveJSON", "LiveCloudAPI", "LiveChangeSet", "LiveGateVersion",
                "LiveProcess",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                server("ServiceLifecycle", "swift-service-lifecycle"),
                server("UnixSignals", "swift-service-lifecycle"),
                server("Logging", "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "livegated",
            dependencies: [
                "LiveGateDaemon", "LiveGateConfig", "LiveGateSystemd", "LiveSDK", "LiveGateVersion", "LiveGateProtocol",
                server("ArgumentParser", "swift-argument-parser"),
                server("ServiceLifecycle", "swift-service-lifecycle"),
                server("UnixSignals", "swift-service-lifecycle"),
                server("Logging", "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // Clients.
        .target(
            name: "LiveGateClient",
            dependencies: [
                "LiveGateProtocol", "LiveJSON", "LiveChangeSet",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(name: "CLiveGate", dependencies: ["CJSONC"]),
        .executableTarget(name: "livegate-c-example", dependencies: ["CLiveGate", "CJSONC"]),
        .executableTarget(
            name: "livegatectl",
            dependencies: [
                "LiveGateClient", "LiveGateProtocol", "LiveJSON", "LiveGateVersion",
                server("ArgumentParser", "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),

        // The reference cloud.
        .target(
            name: "LiveGateCloud",
            dependencies: [
                "LiveCloudAPI", "LiveJSON", "LiveSQLite", "LiveEventLoops", "LiveProcess",
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                server("HTTPTypes", "swift-http-types"),
                server("Hummingbird", "hummingbird"),
                server("HummingbirdCore", "hummingbird"),
                server("HummingbirdWebSocket", "hummingbird-websocket"),
                server("HummingbirdBcrypt", "hummingbird-auth"),
                server("GRDB", "GRDB.swift"),
                server("PostgresNIO", "postgres-nio"),
                server("NIOSSL", "swift-nio-ssl"),
                server("Crypto", "swift-crypto"),
                server("Logging", "swift-log"),
                server("ServiceLifecycle", "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "livegate-cloud",
            dependencies: [
                "LiveGateCloud", "LiveGateVersion",
                server("ArgumentParser", "swift-argument-parser"),
                server("Hummingbird", "hummingbird"),
                server("Logging", "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // Benchmarks.
        .executableTarget(
            name: "livegate-bench",
            dependencies: [
                "LiveCloudAPI", "LiveChangeSet", "LiveSDK", "LiveJSON", "LiveGateVersion", "LiveEventLoops",
                server("ArgumentParser", "swift-argument-parser"),
                server("AsyncHTTPClient", "async-http-client"),
                server("Logging", "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                server("WSClient", "swift-websocket"),
                server("HTTPTypes", "swift-http-types"),
            ],
            swiftSettings: swiftSettings
        ),

        // Fuzzing: the targets (replayed by the tests), and libFuzzer's executable (scripts/fuzz builds it with
        // -sanitize=fuzzer -DLIVEGATE_FUZZ; built plainly it replays inputs given on its command line).
        .target(
            name: "LiveGateFuzzTargets",
            dependencies: [
                "LiveGateProtocol", "LiveCloudAPI", "LiveJSON", "LiveGateConfig", .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "livegate-fuzz", dependencies: ["LiveGateFuzzTargets"], swiftSettings: swiftSettings),

        // Tests.
        .target(name: "SeededRandom", path: "Tests/SeededRandom", swiftSettings: swiftSettings),
        .testTarget(name: "LiveGateProtocolTests", dependencies: ["LiveGateProtocol", "SeededRandom"], swiftSettings: testSettings),
        .testTarget(name: "FuzzCorpusTests", dependencies: ["LiveGateFuzzTargets"], swiftSettings: testSettings),
        .testTarget(
            name: "LiveSQLiteTests",
            dependencies: ["LiveSQLite", server("GRDB", "GRDB.swift"), server("Logging", "swift-log")],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "LiveGateCloudTests",
            dependencies: [
                "LiveGateCloud", "LiveCloudAPI", "LiveJSON", "LiveSQLite", .product(name: "GRDB", package: "GRDB.swift"),
                server("HummingbirdWebSocket", "hummingbird-websocket"), server("Logging", "swift-log"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: testSettings
        ),
        .target(name: "JSONTestSupport", dependencies: ["LiveJSON", "SeededRandom"], path: "Tests/JSONTestSupport", swiftSettings: swiftSettings),
        .testTarget(name: "LiveJSONTests", dependencies: ["LiveJSON", "SeededRandom", "JSONTestSupport"], swiftSettings: testSettings),
        .testTarget(name: "LiveChangeSetTests", dependencies: ["LiveChangeSet", "SeededRandom"], swiftSettings: testSettings),
        .testTarget(
            name: "LiveCloudAPITests",
            dependencies: ["LiveCloudAPI", "LiveJSON", "SeededRandom", "JSONTestSupport"],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "LiveSDKTests",
            dependencies: [
                "LiveSDK", "LiveCloudAPI", "LiveChangeSet", "LiveJSON", "SeededRandom", .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: testSettings
        ),
        .testTarget(name: "LiveProcessTests", dependencies: ["LiveProcess"], swiftSettings: testSettings),
        .testTarget(
            name: "LiveGateDaemonTests",
            dependencies: [
                "LiveGateDaemon", "LiveGateConfig", "LiveGateProtocol", "LiveGateSystemd", "LiveSDK", "LiveCloudAPI", "LiveJSON",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "LiveGateClient", "LiveGateProtocol", "LiveCloudAPI", "LiveJSON", "LiveChangeSet", "LiveSDK", "CLiveGate", "CJSONC",
                "SeededRandom",
                server("AsyncHTTPClient", "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                server("WSClient", "swift-websocket"),
                server("HTTPTypes", "swift-http-types"),
                server("Logging", "swift-log"),
            ],
            swiftSettings: testSettings
        ),
    ]
)
