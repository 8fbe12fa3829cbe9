// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "securepush",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "securepush", targets: ["securepush"]),
        .library(name: "PushWire", targets: ["PushWire"]),
        .library(name: "PushEventLoop", targets: ["PushEventLoop"]),
        .library(name: "PushSession", targets: ["PushSession"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // HPKE (RFC 9180) with X25519 and X-Wing for sealed payloads (SPEC.md 7.6): Debian 12's
        // OpenSSL 3.0 has no HPKE, and no primitive is written here. Only PushSealing imports it.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // libevent (and its OpenSSL bufferevents) from Debian's libevent-dev and libssl-dev.
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent_openssl",
            providers: [.apt(["libevent-dev", "libssl-dev"])]
        ),
        // libcrypto for HMAC, HKDF, PBKDF2 and randomness: already linked for TLS, so no
        // second crypto library is built.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libpq from Debian's libpq-dev (14 or later, for pipeline mode): the PostgreSQL
        // client library behind PushPostgres.
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The NATS C client from Debian's libnats-dev (3.4 or later), behind PushNATS.
        .systemLibrary(
            name: "CNats",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        // Starting, watching and stopping child processes (services for the demo, bench and tests).
        .target(name: "PushProcess", dependencies: ["PushClock"]),
        // Every clock the project reads, below everything that reads one.
        .target(name: "PushClock"),
        // Escaping for the text formats the project writes by hand (JSON string literals,
        // Prometheus text, XML): one escaper each, below the logs, the bench and the conformance reports.
        .target(name: "PushText"),
        // The wire codec: frames, fields, messages, the incremental decoder. No I/O.
        .target(name: "PushWire"),
        // The rules of a protocol connection as a state machine with no I/O, for both sides.
        .target(name: "PushSession", dependencies: ["PushWire"]),
        // The only importer of CLibevent.
        .target(name: "PushEventLoop", dependencies: ["CLibevent", "PushWire", "PushClock"]),
        // Keys, password hashes, fetch tokens, registrations and provider credentials.
        .target(name: "PushSecurity", dependencies: ["COpenSSL", "PushWire"]),
        // The connection lifecycle shared by the store and the gateway, and their
        // observability: metrics, the /metrics /healthz /readyz endpoint, JSON logs.
        .target(name: "PushService", dependencies: [
            "PushClock", "PushText", "PushWire", "PushSession", "PushEventLoop",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The only importer of CPostgres: a pipelined, non-blocking PostgreSQL client whose
        // socket the event loop watches (no threads), and a blocking one for CLI commands.
        .target(name: "PushPostgres", dependencies: ["CPostgres", "PushEventLoop"]),
        // The only importer of CNats: a NATS client whose socket the event loop watches
        // (libnats in its external-event-loop mode), and JetStream's JSON API over it.
        .target(name: "PushNATS", dependencies: ["CNats", "PushClock", "PushEventLoop"]),
        // The HTTP provider API's rules with no I/O: routes, the JSON body and the SEND it
        // asks for, problem documents and answers. Compiled alone by fuzz/run.sh too.
        .target(name: "PushProviderAPI", dependencies: ["PushClock", "PushWire"]),
        // Sealed payloads (SPEC.md 7.6): device key pairs, key ids, sealing to device keys
        // and opening on the device. The only importer of swift-crypto's `Crypto` (HPKE, ChaCha20-Poly1305);
        // SHA-256 comes from PushSecurity's OpenSSL, cheaper on the store's path.
        .target(name: "PushSealing", dependencies: ["PushWire", "PushSecurity", .product(name: "Crypto", package: "swift-crypto")]),
        // The payload store's logic with no I/O: `StoreLogic`, which decides every rule and
        // value and returns the reads, writes and reply it needs; the values it decides
        // (`WriteOperation`, `PayloadLife`, `LoginThrottle`, `FailureWindow`,
        // `RegistrationMinting`, idempotency keys, sealing at rest) and the protocols of the
        // backends that persist them (`StoreBackend`, the administration commands').
        .target(name: "PushStoreLogic", dependencies: ["PushClock", "PushWire", "PushSession", "PushSecurity", "PushSealing"]),
        // The store's SQLite backend, the only importer of CSQLite: persists what
        // PushStoreLogic decided (readers on the loops, a group-commit writer thread) and
        // decides nothing.
        .target(name: "PushStoreSQLite", dependencies: [
            "PushStoreLogic", "CSQLite", "PushClock", "PushWire", "PushEventLoop", "PushSession", "PushSecurity",
        ]),
        // The store's PostgreSQL backend over PushPostgres: persists what PushStoreLogic
        // decided (reads and group commits on the loop) and decides nothing.
        .target(name: "PushStorePostgres", dependencies: [
            "PushStoreLogic", "PushPostgres", "PushClock", "PushWire", "PushEventLoop", "PushService", "PushSession", "PushSecurity",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // The payload store as a service: its server, loops, HTTP provider API, outbox
        // forwarder and configuration, and the administration that picks a backend
        // (`StoreDatabase`).
        // PushClient: a store started with --gateway hands SENDs' pushes to the gateway as
        // a client of it (`OutboxForwarder` over a `ServerLink`).
        .target(name: "PushStore", dependencies: [
            "PushStoreLogic", "PushStoreSQLite", "PushStorePostgres",
            "PushClock", "PushWire", "PushProviderAPI", "PushEventLoop", "PushService", "PushSession", "PushSecurity", "PushClient", "PushPostgres",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Device and provider clients.
        .target(name: "PushClient", dependencies: ["PushClock", "PushWire", "PushSession", "PushEventLoop", "PushSecurity", "PushSealing"]),
        // The push gateway: routing, offline queues, fan-out, metrics.
        // PushClient: the gateway follows the store's device registry as a client of the
        // store (`RegistryFollower` over a `ServerLink`).
        .target(name: "PushGateway", dependencies: [
            "PushClock", "PushWire", "PushEventLoop", "PushService", "PushSession", "PushSecurity", "PushClient", "PushNATS",
            .product(name: "Logging", package: "swift-log"),
        ]),
        // Load generators behind `securepush bench`.
        // PushStore: an embedded deployment enrolls its devices, users and API token through
        // the store's own administration (`StoreDatabase`), as an operator's commands would.
        .target(name: "PushBench", dependencies: [
            "PushClock", "PushWire", "PushSession", "PushEventLoop", "PushSecurity", "PushClient", "PushProcess", "PushStore", "PushStoreLogic", "PushText", "PushSealing",
            .product(name: "Histogram", package: "hdrhistogram-swift"),
        ]),
        // The black-box protocol conformance suite behind `securepush conformance`.
        // With --data-dir it enrolls and revokes the devices it uses in the store's registry,
        // through the store's administration (`StoreDatabase`): hence PushStore.
        .target(name: "PushConformance", dependencies: ["PushClock", "PushWire", "PushSession", "PushEventLoop", "PushClient", "PushSecurity", "PushStore", "PushStoreLogic", "PushText", "PushSealing",
                                                 "PushService", "PushProcess", .product(name: "Logging", package: "swift-log")]),
        .executableTarget(
            name: "securepush",
            dependencies: [
                "PushClock", "PushWire", "PushEventLoop", "PushSecurity", "PushService", "PushSession", "PushStore", "PushStoreLogic", "PushStoreSQLite", "PushStorePostgres", "PushGateway", "PushClient", "PushBench", "PushConformance", "PushProcess", "PushNATS", "PushSealing",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "PushWireTests", dependencies: ["PushWire", "PushTestSupport"]),
        .testTarget(name: "PushSessionTests", dependencies: ["PushSession", "PushWire"]),
        .testTarget(name: "PushSecurityTests", dependencies: ["PushSecurity", "PushWire"]),
        // HPKE against RFC 9180's published vectors, X-Wing's, and the sealed payload's golden vectors.
        .testTarget(name: "PushSealingTests", dependencies: ["PushSealing", "PushWire"]),
        // The escapers, and that what they write parses back (FoundationXML, JSONSerialization).
        .testTarget(name: "PushTextTests", dependencies: ["PushText"]),
        // Helpers the integration tests share: temporary deployments, services in-process
        // on loop threads, and the real binary as child processes.
        .target(name: "PushTestSupport", dependencies: [
            "PushClock", "PushClient", "PushSecurity", "PushWire", "PushSession", "PushEventLoop", "PushProcess", "PushService", "PushStore", "PushStoreLogic", "PushGateway",
            "PushPostgres", "PushNATS", "COpenSSL", "PushSealing",
            .product(name: "Logging", package: "swift-log"),
        ], path: "Tests/PushTestSupport"),
        .testTarget(name: "PushStoreTests", dependencies: ["PushStore", "PushStoreLogic", "PushStoreSQLite", "PushStorePostgres", "PushProviderAPI", "PushService", "PushWire", "PushSecurity", "PushClient", "PushTestSupport"]),
        .testTarget(name: "PushClientTests", dependencies: [
            "PushClock", "PushClient", "PushSession", "PushEventLoop", "PushSecurity", "PushWire", "PushStore", "PushStoreLogic", "PushStoreSQLite",
            "PushStorePostgres", "PushTestSupport", "PushSealing", "PushPostgres",
        ]),
        .testTarget(name: "PushServiceTests", dependencies: ["PushService", "PushSession", "PushWire", "PushEventLoop", "PushTestSupport"]),
        .testTarget(name: "PushGatewayTests", dependencies: [
            "PushClock", "PushGateway", "PushService", "PushSecurity", "PushWire", "PushClient", "PushTestSupport",
            "PushNATS", "PushEventLoop",
        ]),
        .testTarget(name: "PushConformanceTests", dependencies: ["PushConformance", "PushClient", "PushWire", "PushTestSupport"],
                    exclude: ["ClientFixtures"]),
        .testTarget(name: "PushBenchTests", dependencies: ["PushBench", "PushTestSupport"]),
        // Against a real PostgreSQL server each test run starts itself (PostgresCluster).
        .testTarget(name: "PushPostgresTests", dependencies: ["PushPostgres", "PushEventLoop", "PushTestSupport"]),
        // Against a real nats-server each test starts itself (NATSServer).
        .testTarget(name: "PushNATSTests", dependencies: ["PushClock", "PushNATS", "PushEventLoop", "PushTestSupport"]),
        .testTarget(name: "PushEventLoopTests", dependencies: ["PushClock", "PushEventLoop", "PushWire", "PushSession", "PushProcess", "PushTestSupport"]),
    ]
)
