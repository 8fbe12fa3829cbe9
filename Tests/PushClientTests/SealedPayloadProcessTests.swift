import Foundation
import PushClient
import PushPostgres
import PushSealing
import PushSecurity
import PushStore
import PushStoreLogic
@testable import PushStoreSQLite
import PushTestSupport
import PushWire
import Testing

/// Sealed payloads (issue 40) across real processes on 127.0.0.1: `device login` registers
/// each device's key, `send --seal` seals to them, `device run` opens what it fetches.
@Suite("Sealed payloads across processes", .ownThread, .serialized)
struct SealedPayloadProcessTests {
    /// A gateway and a store (with its HTTP API) over `deployment`.
    struct Services {
        let gateway: ServiceProcess
        let store: ServiceProcess

        init(_ deployment: TemporaryDeployment, http: Bool = false) throws {
            gateway = try ServiceProcess(["gateway", "--data-dir", deployment.directory])
            store = try ServiceProcess(["store", "--data-dir", deployment.directory, "--gateway", "127.0.0.1:\(gateway.port)"]
                                       + (http ? ["--http", "127.0.0.1:0"] : []))
        }

        var storeAddress: String { "127.0.0.1:\(store.port)" }

        func stop() {
            _ = store.terminate()
            _ = gateway.terminate()
        }
    }

    static func provider(_ deployment: TemporaryDeployment, _ services: Services, _ arguments: [String]) throws
        -> (status: Int32, stdout: String, stderr: String) {
        try SecurePushBinary.run(arguments + ["--store", services.storeAddress,
                                              "--provider-key", deployment.directory + "/provider.key", "--timeout", "20"])
    }

    /// `send` to alice; the id it printed (and what it said on stderr).
    static func send(_ deployment: TemporaryDeployment, _ services: Services, _ text: String, _ flags: [String] = []) throws -> String {
        try sendSaying(deployment, services, text, flags).id
    }

    static func sendSaying(_ deployment: TemporaryDeployment, _ services: Services, _ text: String, _ flags: [String] = []) throws
        -> (id: String, stderr: String) {
        let sent = try provider(deployment, services, ["send", "--to", "user:alice", "--text", text] + flags)
        guard sent.status == 0, let line = sent.stdout.split(separator: "\n").first(where: { $0.hasPrefix("id ") }) else {
            throw ServiceError.failed("send \(flags): \(sent.stdout)\(sent.stderr)")
        }
        return (String(line.dropFirst(3)), sent.stderr)
    }

    /// `provider keys alice`: device, suite and key id of each line after the header.
    static func keys(_ deployment: TemporaryDeployment, _ services: Services, user: String = "alice") throws -> [[String]] {
        let listed = try provider(deployment, services, ["provider", "keys", user])
        guard listed.status == 0 else { throw ServiceError.failed("provider keys: \(listed.stderr)") }
        return listed.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: " ").map(String.init) }
    }

    static func shows(_ device: DeviceRunProcess, id: String, text: String) -> Bool {
        device.child.standardOutput.split(separator: "\n").contains { $0.hasSuffix(" \(id) \(text)") }
    }

    @Test("""
        [4.18-1] [7.6-5] [4.14-10] a user with three devices (one X-Wing) sees a `send --seal` message on all three; a fourth \
        enrolled afterwards is told NOT_SEALED_FOR_DEVICE, shows the generic prompt once and does not acknowledge; \
        a revoked device's key is gone from the next KEYS
        """)
    func threeDevicesThenAFourth() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let names = ["phone-1", "phone-2", "tablet"]
        let registrations = try names.map { try deployment.enroll($0) }
        let services = try Services(deployment)
        defer { services.stop() }
        let gatewayAddress = "127.0.0.1:\(services.gateway.port)"
        var devices: [DeviceRunProcess] = []
        defer { for device in devices { _ = device.stopAndCollect() } }
        for (name, registration) in zip(names, registrations) {
            devices.append(try DeviceRunProcess(deployment: deployment, device: name, user: "alice", password: "alice-pw",
                                                registration: registration, store: services.store, gatewayAddress: gatewayAddress,
                                                loginExtra: name == "tablet" ? ["--key-suite", "xwing"] : []))
        }
        let listed = try Self.keys(deployment, services)
        #expect(listed.map { $0.first ?? "" } == names, "[4.18-1] every device's key, in device id order")
        #expect(listed.map { $0.count > 1 ? $0[1] : "" } == ["x25519", "x25519", "xwing"])
        for (row, device) in zip(listed, devices) {
            let key = try #require(try DeviceKeyFile(directory: device.stateDirectory).load())
            #expect(row.last == key.keyID(deviceID: row[0]).description, "the key id is the device's own key's (7.6-2)")
        }

        let text = "sealed code 4711 for three"
        let (id, said) = try Self.sendSaying(deployment, services, text, ["--seal"])
        #expect(said.contains("sealed to 3 devices of alice: phone-1, phone-2, tablet"), "\(said)")
        for (name, device) in zip(names, devices) {
            #expect(try waitUntil(timeoutSeconds: 30) { Self.shows(device, id: id, text: text) },
                    "\(name) shows the sealed message: \(device.child.standardOutput)\(device.child.standardError)")
        }

        // STORE sealed, then PUSH through the gateway: the two-step send seals the same way.
        let twoStep = "sealed code 4713, stored then pushed"
        let twoStepID = try Self.send(deployment, services, twoStep, ["--seal", "--gateway", gatewayAddress])
        #expect(try waitUntil(timeoutSeconds: 30) { Self.shows(devices[0], id: twoStepID, text: twoStep) })

        // A fourth device, enrolled and keyed after the message was sealed.
        let late = try DeviceRunProcess(deployment: deployment, device: "phone-4", user: "alice", password: "alice-pw",
                                        registration: try deployment.enroll("phone-4"), store: services.store,
                                        gatewayAddress: gatewayAddress)
        devices.append(late)
        #expect(try waitUntil(timeoutSeconds: 30) { Self.shows(late, id: id, text: DeviceClient.genericText) },
                "[4.14-10] the generic prompt: \(late.child.standardOutput)\(late.child.standardError)")
        #expect(late.child.standardError.contains("\(id): sealed payload not readable here, it was sealed before this device's current key was registered"),
                "\(late.child.standardError)")
        let shownIDs = try String(contentsOfFile: late.stateDirectory + "/" + ShownIDFile.fileName, encoding: .utf8)
        #expect(shownIDs.contains("\(id) -\n"), "remembered as shown, not to be acknowledged")
        // A plain message after it: once it is shown (and acknowledged), an ACK of the sealed one would have gone before.
        let plain = "plain 4712 after the sealed one"
        let plainID = try Self.send(deployment, services, plain)
        #expect(try waitUntil(timeoutSeconds: 30) { Self.shows(late, id: plainID, text: plain) })
        #expect(try waitUntil(timeoutSeconds: 10) { unreadCount(store: services.store, token: late.token) == 2 },
                "[4.14-10] the two sealed ids stay unacknowledged: \(String(describing: unreadCount(store: services.store, token: late.token)))")
        let lines = late.child.standardOutput.split(separator: "\n")
        #expect(lines.filter { $0.contains(id) }.count == 1, "the prompt shown once: \(lines)")

        let revoked = try SecurePushBinary.run(["device", "revoke", "phone-2", "--data-dir", deployment.directory])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(try Self.keys(deployment, services).map { $0.first ?? "" } == ["phone-1", "phone-4", "tablet"],
                "[4.18-1] the revoked device's key is gone from the next KEYS")
    }

    @Test("""
        [4.6-5] [7.6-5] `device login --new-key` while `device run` runs: the store has the new key at once, and the running \
        device opens what is sealed to it from then on, even when the push comes before it noticed the new key file
        """)
    func newKeyWhileRunning() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let services = try Services(deployment)
        defer { services.stop() }
        let device = try DeviceRunProcess(deployment: deployment, device: "phone", user: "alice", password: "alice-pw",
                                          registration: try deployment.enroll("phone"), store: services.store,
                                          gatewayAddress: "127.0.0.1:\(services.gateway.port)")
        defer { _ = device.stopAndCollect() }
        let before = try #require(try DeviceKeyFile(directory: device.stateDirectory).load())
        let relogin = try SecurePushBinary.run(["device", "login", "--store", services.storeAddress, "--user", "alice",
                                                "--device", "phone", "--state-dir", device.stateDirectory, "--new-key"],
                                               stdin: "alice-pw\n")
        #expect(relogin.status == 0, "\(relogin.stderr)")
        let after = try #require(try DeviceKeyFile(directory: device.stateDirectory).load())
        #expect(after.publicKey != before.publicKey)
        #expect(try Self.keys(deployment, services) == [["phone", "x25519", after.keyID(deviceID: "phone").description]])
        let text = "sealed to the new key 4714"
        let id = try Self.send(deployment, services, text, ["--seal"])
        #expect(try waitUntil(timeoutSeconds: 30) { Self.shows(device, id: id, text: text) },
                "\(device.child.standardOutput)\(device.child.standardError)")
    }

    @Test("""
        [7.6-3] [7.6-5] [4.14-10] a stanza moved to another device, or into another payload, is kept by the store (its \
        structure is sound) but does not open on the device, which shows the generic prompt
        """)
    func movedStanzasDoNotOpen() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        let services = try Services(deployment)
        defer { services.stop() }
        var devices: [String: DeviceRunProcess] = [:]
        defer { for device in devices.values { _ = device.stopAndCollect() } }
        for name in ["phone-1", "phone-2"] {
            devices[name] = try DeviceRunProcess(deployment: deployment, device: name, user: "alice", password: "alice-pw",
                                                 registration: try deployment.enroll(name), store: services.store,
                                                 gatewayAddress: "127.0.0.1:\(services.gateway.port)")
        }
        let provider = try deployment.provider(store: services.store.port)
        guard case .keysOK(let keys) = try provider.request(.keys(Keys(user: "alice"))) else { throw ServiceError.failed("KEYS") }
        let phone1 = try #require(keys.keys.first { $0.deviceID == "phone-1" })
        let phone2 = try #require(keys.keys.first { $0.deviceID == "phone-2" })
        func send(_ bytes: [UInt8]) throws -> PayloadID {
            guard case .sendOK(let ok) = try provider.request(.send(SendRequest(user: "alice", payload: bytes, form: .sealed))) else {
                throw ServiceError.failed("SEND")
            }
            return ok.id
        }

        // phone-1's stanza under phone-2's key id: the store hands it to phone-2.
        var toOther = try SealedPayload(parsing: try Sealer.seal(Array("moved to another device".utf8), recipient: "alice",
                                                                 devices: [phone1]).bytes)
        toOther.stanzas[0].keyID = phone2.keyID
        let movedToDevice = try send(toOther.bytes)
        // phone-2's stanza of one payload in another payload sealed to phone-2.
        let first = try SealedPayload(parsing: try Sealer.seal(Array("first".utf8), recipient: "alice", devices: [phone2]).bytes)
        var second = try SealedPayload(parsing: try Sealer.seal(Array("moved into another payload".utf8), recipient: "alice",
                                                                devices: [phone2]).bytes)
        second.stanzas = first.stanzas
        let movedToPayload = try send(second.bytes)

        let device = try #require(devices["phone-2"])
        for id in [movedToDevice, movedToPayload] {
            #expect(try waitUntil(timeoutSeconds: 30) { Self.shows(device, id: id.hex, text: DeviceClient.genericText) },
                    "\(device.child.standardOutput)\(device.child.standardError)")
            #expect(device.child.standardError.contains("\(id.hex): sealed payload not readable here, it does not open with this device's key"))
        }
        #expect(!device.child.standardOutput.contains("moved"), "no content of either is shown")
    }

    @Test("[4.19-6] `send --seal` and `--seal-on-arrival` for a user whose devices have no key: typed errors and non-zero exits")
    func noKeysNoSealedSend() throws {
        let deployment = try TemporaryDeployment()
        try deployment.addUser("alice", password: "alice-pw")
        _ = try deployment.enroll("phone")
        let services = try Services(deployment)
        defer { services.stop() }
        let sealed = try Self.provider(deployment, services, ["send", "--to", "user:alice", "--text", "x", "--seal"])
        #expect(sealed.status != 0 && sealed.stderr.contains("no device of alice has a key to seal to"), "\(sealed)")
        let onArrival = try Self.provider(deployment, services, ["send", "--to", "user:alice", "--text", "x", "--seal-on-arrival"])
        #expect(onArrival.status != 0 && onArrival.stderr.contains("no device of alice has a key for the store to seal to"), "\(onArrival)")
        let nobody = try Self.provider(deployment, services, ["provider", "keys", "bob"])
        #expect(nobody.status != 0 && nobody.stderr.contains("the store has no user bob"), "\(nobody)")
        let both = try Self.provider(deployment, services, ["send", "--to", "user:alice", "--text", "x", "--seal", "--seal-on-arrival"])
        #expect(both.status != 0 && both.stderr.contains("at most one of --seal and --seal-on-arrival"), "\(both)")
    }
}

/// What a store keeps of sealed messages: its database and its data keys, read in full,
/// hold no text of them (issue 40), on both backends.
@Suite("Sealed payloads at rest", .ownThread, .serialized)
struct SealedAtRestProcessTests {
    enum Backend {
        case sqlite, postgres
    }

    /// Every payload row's body opened with the deployment's `data-keys`, as whoever holds both would.
    static func openedBodies(_ deployment: TemporaryDeployment, backend: Backend, postgresURL: String?) throws -> [PayloadID: [UInt8]] {
        let sealer = PayloadSealer(ring: try DataKeyRing(path: DataKeyFile.path(inDirectory: deployment.directory)))
        var rows: [(id: PayloadID, keyID: UInt32, body: [UInt8], userID: UInt64)] = []
        switch backend {
        case .sqlite:
            let connection = try SQLiteConnection(path: StoreFiles.databasePath(deployment.directory))
            let statement = try connection.prepare("SELECT id_high, id_low, key_id, body, user_id FROM payloads WHERE body IS NOT NULL",
                                                   persistent: false)
            while try statement.step() {
                rows.append((PayloadID(high: UInt64(bitPattern: statement.int(0)), low: UInt64(bitPattern: statement.int(1))),
                             UInt32(statement.int(2)), statement.blob(3), UInt64(statement.int(4))))
            }
        case .postgres:
            let url = try #require(postgresURL)
            let connection = try PostgresBlockingConnection(url)
            defer { connection.close() }
            let result = try connection.query(
                "SELECT encode(id, 'hex') || ' ' || key_id || ' ' || encode(body, 'hex') || ' ' || user_id FROM payloads WHERE body IS NOT NULL")
            for row in result.rows.indices {
                let line = try result.text(row, 0)
                let parts = line.split(separator: " ").map(String.init)
                guard parts.count == 4, let id = PayloadID(hex: parts[0]), let keyID = UInt32(parts[1]),
                      let body = [UInt8](hex: parts[2]), let userID = UInt64(parts[3]) else { throw ServiceError.failed("row \(line)") }
                rows.append((id, keyID, body, userID))
            }
        }
        var opened: [PayloadID: [UInt8]] = [:]
        for row in rows { opened[row.id] = try sealer.open(row.body, keyID: row.keyID, id: row.id, userID: row.userID) }
        return opened
    }

    /// Every byte of every file under `directory`.
    static func everyFile(under directory: String) -> [(String, Data)] {
        let enumerator = FileManager.default.enumerator(atPath: directory)
        var files: [(String, Data)] = []
        while let name = enumerator?.nextObject() as? String {
            let path = directory + "/" + name
            if let data = FileManager.default.contents(atPath: path) { files.append((path, data)) }
        }
        return files
    }

    @Test("""
        [4.19-5] [4.19-6] SQLite: the database files and data-keys, read in full and opened with those keys, hold no text \
        of a message sealed by the provider (`send --seal`) or on arrival (`--seal-on-arrival`); a plain one's text is there
        """)
    func noPlaintextAtRestOnSQLite() throws {
        try noPlaintextAtRest(backend: .sqlite)
    }

    @Test("""
        [4.19-5] [4.19-6] PostgreSQL: the database cluster's files and data-keys, read in full and the rows opened with \
        those keys, hold no text of a message sealed by the provider or on arrival; a plain one's text is there
        """, .enabled(if: PostgresCluster.testsEnabled))
    func noPlaintextAtRestOnPostgres() throws {
        try noPlaintextAtRest(backend: .postgres)
    }

    func noPlaintextAtRest(backend: Backend) throws {
        let url = backend == .postgres ? try PostgresCluster.shared().createDatabase() : nil
        let deployment = try TemporaryDeployment(commandLine: backend == .postgres, database: url)
        try deployment.addUser("alice", password: "alice-pw")
        let registration = try deployment.enroll("phone")
        let services = try SealedPayloadProcessTests.Services(deployment)
        var stopped = false
        defer { if !stopped { services.stop() } }
        let device = try DeviceRunProcess(deployment: deployment, device: "phone", user: "alice", password: "alice-pw",
                                          registration: registration, store: services.store,
                                          gatewayAddress: "127.0.0.1:\(services.gateway.port)")
        defer { _ = device.stopAndCollect() }
        let marker = UUID().uuidString.prefix(8)
        let sealedText = "sealed-by-provider \(marker)", arrivalText = "sealed-on-arrival \(marker)", plainText = "plain-control \(marker)"
        let sealedID = try SealedPayloadProcessTests.send(deployment, services, sealedText, ["--seal"])
        let arrivalID = try SealedPayloadProcessTests.send(deployment, services, arrivalText, ["--seal-on-arrival"])
        let plainID = try SealedPayloadProcessTests.send(deployment, services, plainText)
        for (id, text) in [(sealedID, sealedText), (arrivalID, arrivalText), (plainID, plainText)] {
            #expect(try waitUntil(timeoutSeconds: 30) { SealedPayloadProcessTests.shows(device, id: id, text: text) },
                    "the device shows \(text): \(device.child.standardOutput)\(device.child.standardError)")
        }
        services.stop()
        stopped = true
        if backend == .postgres { _ = try PostgresCluster.shared().administer("CHECKPOINT") }

        let opened = try Self.openedBodies(deployment, backend: backend, postgresURL: url)
        let plainKey = try #require(PayloadID(hex: plainID))
        let plainBody = try #require(opened[plainKey])
        #expect(plainBody == Array(plainText.utf8), "the control: a plain message's text is readable with the data keys")
        for (id, text) in [(sealedID, sealedText), (arrivalID, arrivalText)] {
            let key = try #require(PayloadID(hex: id))
            let body = try #require(opened[key], "\(text) is kept")
            let sealed = try SealedPayload(parsing: body)
            #expect(sealed.stanzas.count == 1 && SealedNames.payloadID(sealNonce: sealed.sealNonce).hex == id,
                    "[4.19-5] kept as the 7.6 payload, under its derived id")
            #expect(!String(decoding: body, as: UTF8.self).contains(text))
        }
        let directories = [deployment.directory] + (backend == .postgres ? [try PostgresCluster.shared().directory] : [])
        var searched = 0
        for directory in directories {
            // The devices' state directories are theirs, not the store's: they show the text.
            for (path, data) in Self.everyFile(under: directory) where !path.contains("/state-") {
                searched += data.count
                for text in [sealedText, arrivalText] {
                    #expect(data.range(of: Data(text.utf8)) == nil, "\(text) found in \(path)")
                }
            }
        }
        #expect(searched > 0)
    }
}
