import Foundation
import PushClient
import PushEventLoop
import PushSealing
import PushSecurity
import PushTestSupport
import PushWire
import Testing

/// The device's key file (SPEC.md 7.5-6) and the key rules of its LOGIN (4.6-5, 4.6-8).
@Suite("Device keys: the device-key file and LOGIN's key")
struct DeviceKeyTests {
    static func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "securepush-device-key-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test("[7.5-6] the key is one line of the suite digit, a space and the private key in hex, owner-only, read back as the same key",
          arguments: KeySuite.allCases)
    func roundTrip(suite: KeySuite) throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = DeviceKeyFile(directory: directory)
        #expect(try file.load() == nil, "no file is no key")
        let (key, made) = try file.keyForLogin(suite: suite)
        #expect(made && key.suite == suite)
        #expect(try file.load() == nil, "a new key is saved only once the store has registered it")
        try file.save(key)
        #expect(try Self.mode(file.path) == 0o600, "[7.5-5] owner-only")
        let text = try String(contentsOfFile: file.path, encoding: .utf8)
        #expect(text == "\(suite.rawValue) \(key.privateKeyBytes.map { String(format: "%02x", $0) }.joined())\n")
        #expect(key.privateKeyBytes.count == 32, "suite 1: the X25519 private key; suite 2: the X-Wing seed")
        let again = try #require(try file.load())
        #expect(again.publicKey == key.publicKey && again.suite == suite)
        let (kept, madeAgain) = try file.keyForLogin()
        #expect(!madeAgain && kept.publicKey == key.publicKey, "a key is made only once")
        let other: KeySuite = suite == .x25519 ? .xwing : .x25519
        #expect(throws: DeviceKeyFile.Failure.otherSuite(file.path, has: suite, asked: other)) { _ = try file.keyForLogin(suite: other) }
        let (replaced, madeNew) = try file.keyForLogin(suite: other, replace: true)
        #expect(madeNew && replaced.suite == other && replaced.publicKey != key.publicKey)
    }

    @Test("[7.5-5] a new key replaces the file by rename: a link to the old file keeps the old key whole, and no temporary file is left")
    func replacedAtomically() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = DeviceKeyFile(directory: directory)
        let first = try file.keyForLogin().key
        try file.save(first)
        let oldText = try String(contentsOfFile: file.path, encoding: .utf8)
        try FileManager.default.linkItem(atPath: file.path, toPath: directory + "/old-link")
        let second = try file.keyForLogin(replace: true).key
        try file.save(second)
        #expect(first.publicKey != second.publicKey)
        // Written in place, the link would show the new bytes (or a torn mix of both).
        #expect(try String(contentsOfFile: directory + "/old-link", encoding: .utf8) == oldText)
        #expect(try #require(try file.load()).publicKey == second.publicKey)
        #expect(try Self.mode(file.path) == 0o600)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(names == ["device-key", "old-link"])
    }

    @Test("[7.5-6] a file that is there but unreadable as a key is a typed error, never taken as no key",
          arguments: ["", "1\n", "1 zz\n", "3 " + String(repeating: "ab", count: 32) + "\n", "1 abcd\n",
                      "1 " + String(repeating: "ab", count: 32) + "\nextra\n", "x25519 " + String(repeating: "ab", count: 32) + "\n"])
    func malformedFile(text: String) throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = DeviceKeyFile(directory: directory)
        try Deployment.writePrivate(file.path, text)
        #expect(throws: DeviceKeyFile.Failure.self) { _ = try file.load() }
        do {
            _ = try file.keyForLogin()
            Issue.record("a malformed key file was replaced silently")
        } catch {
            guard case .invalid(let path, _) = error else { Issue.record("\(error)"); return }
            #expect(path == file.path)
            #expect(error.description.contains("--new-key"))
        }
        #expect(try String(contentsOfFile: file.path, encoding: .utf8) == text, "the file is left as it was")
    }

    @Test("[8-6] a key file others may read is refused")
    func tooOpen() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = DeviceKeyFile(directory: directory)
        try file.save(try DeviceKeyPair.generate(suite: .x25519))
        chmod(file.path, 0o644)
        #expect(throws: DeviceKeyFile.Failure.tooOpen(file.path)) { _ = try file.load() }
    }

    @Test("[4.14-10] an id the device must not acknowledge is remembered as such across a restart; older lines read as acknowledged")
    func shownIDsRememberNotAcknowledged() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let ids = (1...4).map { PayloadID(high: 7, low: UInt64($0)) }
        let file = ShownIDFile(directory: directory, capacity: 2)
        var written: [ShownIDFile.Entry] = []
        for (index, id) in ids.enumerated() {
            let entry = ShownIDFile.Entry(id: id, acknowledged: index % 2 == 0)
            written.append(entry)
            try file.append(id, acknowledged: entry.acknowledged) { written }
        }
        // Four lines past twice the capacity of 2: rewritten with the newest two, marks kept.
        #expect(ShownIDFile(directory: directory, capacity: 2).loadEntries() == Array(written.suffix(2)))
        #expect(ShownIDFile(directory: directory, capacity: 2).load() == Array(ids.suffix(2)))
        let text = try String(contentsOfFile: directory + "/" + ShownIDFile.fileName, encoding: .utf8)
        #expect(text == ids[2].hex + "\n" + ids[3].hex + " -\n")
    }

    @Test("[4.6-8] LOGIN_OK naming another key fails the login; one naming the device's key, or none (a 1.4 store), does not")
    func loginOKKeyCheck() throws {
        let key = try DeviceKeyPair.generate(suite: .x25519)
        let own = SealedNames.keyID(suite: .x25519, deviceID: "phone", publicKey: key.publicKey)
        let other = KeyID(value: own.value ^ 1)
        let login = DeviceLogin.request(user: "alice", password: Array("pw".utf8), deviceID: "phone", key: key)
        #expect(login.deviceKey == DevicePublicKey(suite: .x25519, bytes: key.publicKey), "[4.6-5] every LOGIN carries the key")
        #expect(try DeviceLogin.check(LoginOK(token: [1], expiresAt: 1, keyID: own), deviceID: "phone", key: key) == .registered(own))
        #expect(try DeviceLogin.check(LoginOK(token: [1], expiresAt: 1), deviceID: "phone", key: key) == .storeDoesNotSeal)
        #expect(throws: ClientError.keyIDMismatch(sent: own, registered: other)) {
            try DeviceLogin.check(LoginOK(token: [1], expiresAt: 1, keyID: other), deviceID: "phone", key: key)
        }
        // The id is the device's: the same key under another device id is another key id (7.6-2).
        #expect(throws: ClientError.self) {
            try DeviceLogin.check(LoginOK(token: [1], expiresAt: 1, keyID: own), deviceID: "tablet", key: key)
        }
    }

    @Test("a device with an X-Wing key proposes a max_frame its LOGIN fits in; an X25519 one proposes what it was asked")
    func helloFitsTheLogin() {
        #expect(DeviceLogin.hello(keySuite: .xwing, proposed: 1024).maxFrame == 4096)
        #expect(DeviceLogin.hello(keySuite: .xwing, proposed: 65536).maxFrame == 65536)
        #expect(DeviceLogin.hello(keySuite: .x25519, proposed: 1024).maxFrame == 1024)
        #expect(DeviceLogin.hello(keySuite: .xwing).maxFrame == nil, "none proposed: the server's default, 65536")
        let xwingLogin = Message.login(Login(user: String(repeating: "u", count: 64), password: [UInt8](repeating: 1, count: 256),
                                             deviceID: String(repeating: "d", count: 64),
                                             deviceKey: DevicePublicKey(suite: .xwing, bytes: [UInt8](repeating: 2, count: 1216))))
        #expect(xwingLogin.encoded(correlation: 1).count <= 4096)
    }
}

/// A peer on 127.0.0.1 that answers each request with what `answer` says (nil: no reply),
/// for `connections` connections one after the other, and records what it received.
final class ScriptedPeer: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var messages: [Message] = []
    private let answer: @Sendable (Message) -> Message?

    init(connections: Int = 1, answer: @escaping @Sendable (Message) -> Message?) throws {
        (listener, port) = try LoopbackSocket.listen()
        self.answer = answer
        Thread { [self] in
            for _ in 0..<connections { self.serveOne() }
            close(self.listener)
        }.start()
    }

    /// Answers HELLO with HELLO_OK and the rest as `answer` says.
    convenience init(connections: Int = 1, answering answer: @escaping @Sendable (Message) -> Message?) throws {
        try self.init(connections: connections) { message in
            if case .hello = message { return .helloOK(HelloOK(maxFrame: 65536, keepaliveMs: 30_000, maxInflight: 64)) }
            return answer(message)
        }
    }

    private func serveOne() {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        defer { close(connection) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var decoder = FrameDecoder()
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            decoder.feed(Array(buffer[..<count]))
            while let frame = try? decoder.next() {
                guard let message = try? Message.decode(frame) else { return }
                lock.withLock { messages.append(message) }
                guard let reply = answer(message) else { continue }
                let bytes = reply.encoded(correlation: frame.header.correlation)
                _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }

    var received: [Message] { lock.withLock { messages } }

    var receivedLogins: [Login] {
        received.compactMap { if case .login(let login) = $0 { login } else { nil } }
    }
}

/// A store that answers LOGIN with a key id of its choosing: what a store that registered
/// another key than the device sent would say (4.6-8).
func keyIDLyingStore(_ keyID: @escaping @Sendable (Login) -> KeyID?) throws -> ScriptedPeer {
    try ScriptedPeer(answering: { message in
        guard case .login(let login) = message else { return nil }
        return .loginOK(LoginOK(token: [UInt8](repeating: 9, count: 40), expiresAt: 4_000_000_000_000, keyID: keyID(login)))
    })
}

@Suite("device login: the key it registers", .ownThread)
struct DeviceLoginKeyProcessTests {
    @Test("[4.6-8] `device login` fails with a clear message and a non-zero exit when LOGIN_OK names another key, and keeps neither the token nor the key it made")
    func keyIDMismatchFailsTheLogin() throws {
        let store = try keyIDLyingStore { _ in KeyID(value: 0x0123_4567_89ab_cdef) }
        let state = try DeviceKeyTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let run = try SecurePushBinary.run(["device", "login", "--store", "127.0.0.1:\(store.port)", "--user", "alice",
                                            "--device", "phone", "--state-dir", state, "--timeout", "10"], stdin: "pw\n")
        #expect(run.status != 0)
        #expect(run.stderr.contains("login refused") && run.stderr.contains("0123456789abcdef"), "\(run.stderr)")
        let login = try #require(store.receivedLogins.first)
        #expect(login.deviceKey?.suite == .x25519 && login.deviceKey?.bytes.count == 32, "[4.6-5] the LOGIN carried the key")
        #expect(!FileManager.default.fileExists(atPath: state + "/" + TokenStore.fileName))
        #expect(!FileManager.default.fileExists(atPath: state + "/" + DeviceKeyFile.fileName))
    }

    @Test("[4.6-5] [4.6-8] `device login` makes the key once, sends it in every LOGIN, and `--new-key --key-suite xwing` replaces it")
    func loginSendsTheKey() throws {
        let store = try keyIDLyingStore { login in
            login.deviceKey.map { SealedNames.keyID(suite: $0.suite, deviceID: login.deviceID, publicKey: $0.bytes) }
        }
        let state = try DeviceKeyTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let arguments = ["device", "login", "--store", "127.0.0.1:\(store.port)", "--user", "alice", "--device", "phone",
                         "--state-dir", state, "--timeout", "10"]
        let first = try SecurePushBinary.run(arguments, stdin: "pw\n")
        #expect(first.status == 0, "\(first.stderr)")
        let key = try #require(try DeviceKeyFile(directory: state).load())
        #expect(key.suite == .x25519)
        #expect(first.stdout.contains("device key \(key.keyID(deviceID: "phone")) (x25519, new)"), "\(first.stdout)")
        let wrongSuite = try SecurePushBinary.run(arguments + ["--key-suite", "xwing"], stdin: "pw\n")
        #expect(wrongSuite.status != 0 && wrongSuite.stderr.contains("--new-key"), "\(wrongSuite.stderr)")
        _ = store
        let storeAgain = try keyIDLyingStore { login in
            login.deviceKey.map { SealedNames.keyID(suite: $0.suite, deviceID: login.deviceID, publicKey: $0.bytes) }
        }
        let replaced = try SecurePushBinary.run(["device", "login", "--store", "127.0.0.1:\(storeAgain.port)", "--user", "alice",
                                                 "--device", "phone", "--state-dir", state, "--timeout", "10",
                                                 "--new-key", "--key-suite", "xwing"], stdin: "pw\n")
        #expect(replaced.status == 0, "\(replaced.stderr)")
        let newKey = try #require(try DeviceKeyFile(directory: state).load())
        #expect(newKey.suite == .xwing && newKey.publicKey != key.publicKey)
        #expect(storeAgain.receivedLogins.first?.deviceKey == DevicePublicKey(suite: .xwing, bytes: newKey.publicKey))
        #expect(store.receivedLogins.first?.deviceKey == DevicePublicKey(suite: .x25519, bytes: key.publicKey))
    }
}

/// `DeviceClient` and sealed payloads, against a scripted store: what it shows, what it
/// acknowledges, what it remembers.
@Suite("DeviceClient: sealed payloads", .ownThread)
struct DeviceClientSealedTests {
    @Test("""
        [7.6-5] [4.14-10] a sealed view that opens is shown and acknowledged; NOT_SEALED_FOR_DEVICE and a view that does not \
        open show the generic prompt once, are remembered as shown and are never acknowledged, not after a restart either
        """)
    func sealedFetches() throws {
        let deployment = try TemporaryDeployment()
        let registration = deployment.registration("phone")
        let state = try DeviceKeyTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let key = try DeviceKeyPair.generate(suite: .x25519)
        try DeviceKeyFile(directory: state).save(key)
        let entry = DeviceKeyEntry(deviceID: "phone", key: DevicePublicKey(suite: .x25519, bytes: key.publicKey),
                                   keyID: key.keyID(deviceID: "phone"))
        let readable = try Sealer.seal(Array("sealed hello".utf8), recipient: "alice", devices: [entry])
        let damaged = try Sealer.seal(Array("never shown".utf8), recipient: "alice", devices: [entry])
        var damagedBytes = damaged.bytes
        damagedBytes[damagedBytes.count - 1] ^= 1
        let forAnother = PayloadID(high: 0x5eed, low: 4)
        let views: [PayloadID: [UInt8]] = [readable.id: readable.bytes, damaged.id: damagedBytes]
        let keyID = key.keyID(deviceID: "phone")
        let store = try ScriptedPeer(connections: 2, answering: { message in
            switch message {
            case .login: .loginOK(LoginOK(token: [UInt8](repeating: 7, count: 40), expiresAt: 4_000_000_000_000, keyID: keyID))
            // Newest first: the device handles the readable one last, so its ACK comes after any other's.
            case .sync: .syncOK(SyncOK(ids: [readable.id, damaged.id, forAnother], cursor: 3, hasMore: false))
            case .fetch(let fetch) where fetch.id == forAnother: .error(ErrorReply(status: .notSealedForDevice))
            case .fetch(let fetch):
                views[fetch.id].map { .fetchOK(FetchOK(id: fetch.id, payload: $0, sealed: true, createdAt: 1, expiresAt: 4_000_000_000_000)) }
                    ?? .error(ErrorReply(status: .notFound))
            case .ack(let ack): .ackOK(AckOK(id: ack.id))
            default: nil
            }
        })
        let gateway = try ScriptedPeer(connections: 2, answering: { _ in nil })
        let loop = try EventLoop()
        defer { loop.shutdown() }

        func device() -> (DeviceClient, () -> [DeviceNotification], () -> [DeviceEvent]) {
            let client = DeviceClient(loop: loop, gateway: ServerLink.Endpoint(HostPort(host: "127.0.0.1", port: gateway.port)),
                                      store: ServerLink.Endpoint(HostPort(host: "127.0.0.1", port: store.port)),
                                      registration: registration, deviceID: "phone", tokenStore: TokenStore(directory: state),
                                      shownFile: ShownIDFile(directory: state), keyFile: DeviceKeyFile(directory: state))
            var shown: [DeviceNotification] = []
            var events: [DeviceEvent] = []
            client.onNotification = { shown.append($0) }
            client.onEvent = { events.append($0) }
            client.start()
            return (client, { shown }, { events })
        }
        func acks() -> [PayloadID] { store.received.compactMap { if case .ack(let ack) = $0 { ack.id } else { nil } } }

        let (first, shown, events) = device()
        #expect(loop.run(until: { events().contains(.storeConnected) }))
        var loggedIn: Result<UInt64, ClientError>?
        first.login(user: "alice", password: Array("pw".utf8)) { loggedIn = $0 }
        #expect(loop.run(until: { shown().count == 3 && !acks().isEmpty }))
        #expect((try? loggedIn?.get()) != nil, "\(String(describing: loggedIn))")
        #expect(store.receivedLogins.first?.deviceKey == DevicePublicKey(suite: .x25519, bytes: key.publicKey), "[4.6-5]")
        let byID = Dictionary(shown().map { ($0.id, $0.content) }, uniquingKeysWith: { first, _ in first })
        #expect(byID[readable.id] == .payload(Array("sealed hello".utf8)))
        #expect(byID[forAnother] == .generic && byID[damaged.id] == .generic)
        #expect(events().contains(.sealedNotOpened(forAnother, reason: nil)))
        #expect(events().contains(.sealedNotOpened(damaged.id, reason: .bodyDoesNotOpen)))
        #expect(Set(acks()) == [readable.id], "[4.14-10] only what was shown with its content is acknowledged")
        first.stop()

        // Restarted with its state directory: SYNC lists all three again (none gone); the
        // readable one is acknowledged again, the other two are neither shown nor acknowledged.
        let acksBefore = acks().count
        let (second, shownAgain, eventsAgain) = device()
        defer { second.stop() }
        #expect(loop.run(until: { eventsAgain().contains(.storeConnected) && acks().count > acksBefore }))
        #expect(shownAgain().isEmpty)
        #expect(Set(acks()) == [readable.id], "SYNC on each connect may acknowledge the shown one again; never the other two")
    }
}

/// `ProviderClient`'s sealing against a scripted store: the KEYS cache and its cursor.
@Suite("ProviderClient: sealing", .ownThread)
struct ProviderClientSealingTests {
    /// The cursor the scripted store reports in SEND_OK, changed by the test.
    final class Cursor: @unchecked Sendable {
        private let lock = NSLock()
        private var value: UInt64 = 5
        var current: UInt64 {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    @Test("[4.18-5] keys are read once and reused while SEND_OK brings the same cursor, read again after another; each SEND carries a payload sealed to them that the device opens")
    func keysCachedByCursor() throws {
        let key = try DeviceKeyPair.generate(suite: .x25519)
        let entry = DeviceKeyEntry(deviceID: "phone", key: DevicePublicKey(suite: .x25519, bytes: key.publicKey),
                                   keyID: key.keyID(deviceID: "phone"))
        let cursor = Cursor()
        let store = try ScriptedPeer(answering: { message in
            switch message {
            case .keys(let keys) where keys.user == "alice": .keysOK(KeysOK(cursor: 5, keys: [entry]))
            case .send(let send):
                .sendOK(SendOK(id: (try? SealedPayload(parsing: send.payload)).map { SealedNames.payloadID(sealNonce: $0.sealNonce) }
                                   ?? PayloadID(high: 0, low: 0),
                               expiresAt: 1, cursor: cursor.current))
            default: nil
            }
        })
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = ProviderClient(loop: loop, store: ServerLink.Endpoint(HostPort(host: "127.0.0.1", port: store.port)),
                                    providerKey: try SecretKey.generate())
        defer { client.stop() }
        func sealAndSend(_ text: String) throws -> (PayloadID, SendOK) {
            var outcome: Result<(PayloadID, SendOK), ClientError>?
            client.sealed(ProviderClient.SecureMessage(recipient: "alice", payload: Array(text.utf8))) { sealed in
                switch sealed {
                case .success(let sealed):
                    #expect(sealed.message.form == .sealed && sealed.devices == ["phone"])
                    client.sendThroughStore(sealed.message) { sent in outcome = sent.map { (sealed.id, $0) } }
                case .failure(let error): outcome = .failure(error)
                }
            }
            #expect(loop.run(until: { outcome != nil }))
            return try #require(outcome).get()
        }
        func keysRead() -> Int { store.received.filter { if case .keys = $0 { true } else { false } }.count }

        let (firstID, firstOK) = try sealAndSend("one")
        #expect(firstOK.id == firstID && keysRead() == 1)
        _ = try sealAndSend("two")
        #expect(keysRead() == 1, "the same cursor: the cached keys serve")
        cursor.current = 6
        _ = try sealAndSend("three")
        #expect(keysRead() == 1, "the payload that brought the new cursor was sealed with the cache")
        _ = try sealAndSend("four")
        #expect(keysRead() == 2, "[4.18-5] another cursor: KEYS again before the next seal")

        let sends = store.received.compactMap { if case .send(let send) = $0 { send } else { nil } }
        #expect(sends.count == 4 && sends.allSatisfy { $0.form == .sealed })
        let opened = try Opener.open(sends[0].payload, fetchedID: firstID, user: "alice", deviceID: "phone", key: key)
        #expect(opened == Array("one".utf8))
    }

    @Test("a store that answers KEYS with UNKNOWN_TYPE (revision 1.4) gets nothing sealed: a typed error, and no SEND")
    func oldStoreCannotSeal() throws {
        let store = try ScriptedPeer(answering: { message in
            if case .keys = message { return .error(ErrorReply(status: .unknownType)) }
            return nil
        })
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let client = ProviderClient(loop: loop, store: ServerLink.Endpoint(HostPort(host: "127.0.0.1", port: store.port)),
                                    providerKey: try SecretKey.generate())
        defer { client.stop() }
        var outcome: Result<SealedSecureMessage, ClientError>?
        client.sealed(ProviderClient.SecureMessage(recipient: "alice", payload: Array("x".utf8))) { outcome = $0 }
        #expect(loop.run(until: { outcome != nil }))
        guard case .failure(.storeCannotSeal)? = outcome else { Issue.record("\(String(describing: outcome))"); return }
        #expect(!store.received.contains { if case .send = $0 { true } else { false } })
    }
}

@Suite("send --seal to a store of revision 1.4", .ownThread)
struct SealedSendToOldStoreTests {
    @Test("`send --seal` to a store that answers KEYS with UNKNOWN_TYPE sends nothing and exits non-zero, saying why")
    func oldStore() throws {
        let store = try ScriptedPeer(answering: { message in
            if case .keys = message { return .error(ErrorReply(status: .unknownType)) }
            return nil
        })
        let deployment = try TemporaryDeployment()
        let sent = try SecurePushBinary.run(["send", "--store", "127.0.0.1:\(store.port)", "--provider-key", deployment.directory + "/provider.key",
                                             "--to", "user:alice", "--text", "secret", "--seal", "--timeout", "10"])
        #expect(sent.status != 0)
        #expect(sent.stderr.contains("does not know KEYS (a store before protocol revision 1.5)") && sent.stderr.contains("nothing was sent"),
                "\(sent.stderr)")
        #expect(!store.received.contains { if case .send = $0 { true } else { false } })
    }
}
