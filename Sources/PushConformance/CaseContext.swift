import PushClock
import PushEventLoop
import PushSecurity
import PushSession
import PushStore
import PushStoreLogic
import PushWire

/// State shared by every case of one run: the options, a run id that makes every device
/// id, user name and tag unique (so the suite can run again and again against the same
/// services), and a counter.
final class RunState {
    let options: ConformanceOptions
    let runID: String
    private var counter = 0
    /// Set when a service refused a connection: it is down, and the run stops.
    var unreachable: String?
    /// The loop TLS connections run on, made on first use on the run's thread.
    private var tlsLoop: EventLoop?
    /// The store's registry, when the suite can change it; looked for once.
    private var suiteRegistry: SuiteRegistry??
    /// The enrolled device the run's tokens are made for, once known.
    var readerDevice: String?
    /// A second user of the store with an enrolled device, made once (FORBIDDEN checks).
    var otherUser: (user: String, device: String)?
    /// Whether the gateway admits only registrations its store's registry holds, once known.
    var gatewayFollowsRegistry: Bool?

    func registry() -> SuiteRegistry? {
        if let known = suiteRegistry { return known }
        let found = options.keys.flatMap(SuiteRegistry.init(keys:))
        suiteRegistry = .some(found)
        return found
    }

    /// The registry if a case already opened it (never opens one).
    var registryIfOpen: SuiteRegistry? { suiteRegistry ?? nil }

    func loop() throws(ChannelOpenFailure) -> EventLoop {
        if let tlsLoop { return tlsLoop }
        do {
            let made = try EventLoop()
            tlsLoop = made
            return made
        } catch {
            throw ChannelOpenFailure(description: "cannot create an event loop: \(error)", refused: false)
        }
    }

    /// Closes what is left on the loop and undoes the run's enrolments. On the run's
    /// thread, after its last case.
    func close() {
        if case .some(.some(let registry)) = suiteRegistry { registry.close() }
        tlsLoop?.shutdown()
        tlsLoop = nil
    }

    init(options: ConformanceOptions) {
        self.options = options
        var generator = SystemRandomNumberGenerator()
        runID = String(generator.next() as UInt32, radix: 16)
    }

    func unique(_ label: String) -> String {
        counter += 1
        return "cf-\(runID)-\(label)-\(counter)"
    }
}

/// What a case body works with: connections to the services under test, credentials made
/// from the deployment's keys, unique names, and cleanup of what the case stored.
public final class CaseContext {
    let run: RunState
    private var sessions: [WireSession] = []
    /// Store ids this case created; recalled afterwards so later SYNCs stay short.
    private(set) var storedIDs: [PayloadID] = []

    init(run: RunState) {
        self.run = run
    }

    var options: ConformanceOptions { run.options }
    var timeoutMs: Int32 { options.timeoutMs }
    var quietMs: Int32 { options.quietMs }

    func unique(_ label: String) -> String { run.unique(label) }

    // MARK: requirements (each SKIPs the case when unmet)

    func storeEndpoint() throws(CaseStop) -> HostPort {
        guard let store = options.store else { throw .skip("needs --store") }
        return store
    }

    func gatewayEndpoint() throws(CaseStop) -> HostPort {
        guard let gateway = options.gateway else { throw .skip("needs --gateway") }
        return gateway
    }

    func keys() throws(CaseStop) -> ConformanceKeys {
        guard let keys = options.keys else { throw .skip("needs --data-dir for the deployment's keys") }
        return keys
    }

    /// A user the store knows, as the recipient of STOREs.
    func user() throws(CaseStop) -> String {
        guard let user = options.user else { throw .skip("needs --user, a user the store knows") }
        return user
    }

    func password() throws(CaseStop) -> [UInt8] {
        guard options.user != nil, let password = options.password else { throw .skip("needs --user and --password-file to log in") }
        return password
    }

    // MARK: the registry ([4.6-4], [7.3-3], 4.16)

    static let noRegistry = "needs --data-dir of the store's own deployment (its database there), to enroll and revoke devices"

    /// The store's registry, for the cases that enroll or revoke.
    func registry() throws(CaseStop) -> SuiteRegistry {
        guard try keys().dataDirectory != nil, let registry = run.registry() else { throw .skip(Self.noRegistry) }
        return registry
    }

    /// A device of the run's user that the store holds as enrolled: --device, or one the
    /// suite enrolls once per run. Fetch tokens are made for it.
    func readerDevice() throws(CaseStop) -> String {
        if let device = options.device ?? run.readerDevice { return device }
        let user = try user()
        guard options.keys != nil, let registry = run.registry() else {
            throw .skip("needs --device, a device enrolled for --user, or " + Self.noRegistry.dropFirst("needs ".count))
        }
        let device = unique("reader")
        _ = try registry.enroll(device, user: user)
        run.readerDevice = device
        return device
    }

    /// A fresh device of the run's user, enrolled in the store's registry for this case.
    func enrolledDevice(tags: [String] = []) throws(CaseStop) -> RegistrationRecord {
        let user = try user()
        return try registry().enroll(unique("dev"), user: user, tags: tags)
    }

    /// A token of the run's user for its reader device, as LOGIN would issue it.
    func readerToken(expiresInMs: Int64 = 3_600_000) throws(CaseStop) -> [UInt8] {
        try token(user: try user(), device: try readerDevice(), expiresInMs: expiresInMs)
    }

    /// A second user of the store, with an enrolled device: a token of another user than
    /// the recipient, for the FORBIDDEN checks ([4.8-1]). Added once per run, removed at
    /// the end with whatever was stored for it.
    func otherUserToken() throws(CaseStop) -> [UInt8] {
        if let other = run.otherUser { return try token(user: other.user, device: other.device) }
        let registry: SuiteRegistry
        do {
            registry = try self.registry()
        } catch {
            throw .skip("needs a second user for the FORBIDDEN check: " + Self.noRegistry + " (one is added there and removed after)")
        }
        let user = unique("other"), device = unique("other-dev")
        try registry.addThrowawayUser(user)
        _ = try registry.enroll(device, user: user)
        run.otherUser = (user, device)
        return try token(user: user, device: device)
    }

    // MARK: connections

    /// A new connection (TLS when the run has a CA) with nothing sent yet.
    func connect(_ endpoint: HostPort, name: String, receiveBufferBytes: Int32? = nil) throws(CaseStop) -> WireSession {
        let channel: FrameChannel
        do {
            channel = try FrameChannels.open(endpoint, tls: options.tls, timeoutMs: timeoutMs, run: run, receiveBufferBytes: receiveBufferBytes)
        } catch {
            if error.refused { run.unreachable = "the \(name) at \(endpoint) refused a connection: it stopped, so the run stops too" }
            throw .fail("cannot connect to the \(name) at \(endpoint): \(error)")
        }
        let session = WireSession(channel: channel, name: name, timeoutMs: timeoutMs)
        sessions.append(session)
        return session
    }

    func connectStore() throws(CaseStop) -> WireSession { try connect(try storeEndpoint(), name: "store") }
    func connectGateway() throws(CaseStop) -> WireSession { try connect(try gatewayEndpoint(), name: "gateway") }

    static func hello(_ role: PeerRole, credential: [UInt8]? = nil, maxFrame: Int? = nil, maxInflight: UInt32? = nil) -> Hello {
        Hello(role: role, credential: credential, maxFrame: maxFrame.map { UInt32(clamping: $0) }, maxInflight: maxInflight,
              name: "securepush-conformance")
    }

    /// A device connection to the store; devices need no credential there ([4.2-3]).
    func storeDevice(maxFrame: Int? = nil, maxInflight: UInt32? = nil) throws(CaseStop) -> WireSession {
        let session = try connectStore()
        _ = try session.open(Self.hello(.device, maxFrame: maxFrame, maxInflight: maxInflight))
        return session
    }

    func storeProvider(maxFrame: Int? = nil, maxInflight: UInt32? = nil) throws(CaseStop) -> WireSession {
        let credential = try providerCredential(for: .store)
        let session = try connectStore()
        _ = try session.open(Self.hello(.provider, credential: credential, maxFrame: maxFrame, maxInflight: maxInflight))
        return session
    }

    func gatewayProvider(maxFrame: Int? = nil) throws(CaseStop) -> WireSession {
        let credential = try providerCredential(for: .gateway)
        let session = try connectGateway()
        _ = try session.open(Self.hello(.provider, credential: credential, maxFrame: maxFrame))
        return session
    }

    /// Whether the gateway admits only the registrations its store's registry holds as
    /// enrolled ([7.4-4]): asked once per run, with a validly signed registration of a
    /// fresh device that no registry holds.
    func gatewayFollowsRegistry() throws(CaseStop) -> Bool {
        if let known = run.gatewayFollowsRegistry { return known }
        let credential = try registration(device: unique("unenrolled"), user: unique("user"))
        let answer = try connect(try gatewayEndpoint(), name: "gateway").hello(Self.hello(.device, credential: credential))
        let follows: Bool
        switch answer {
        case .helloOK: follows = false
        case .error(let error) where error.status == .badCredentials || error.status == .busy: follows = true
        default: throw .fail("a validly signed registration's HELLO was answered \(describe(answer))")
        }
        run.gatewayFollowsRegistry = follows
        return follows
    }

    /// A device connected to the gateway under a fresh registration. A gateway that
    /// follows a registry admits only enrolled registrations, which the suite does not
    /// make for the gateway cases' own users: those cases SKIP there.
    func gatewayDevice(_ deviceID: String, user: String, tags: [String] = [], receiveBufferBytes: Int32? = nil) throws(CaseStop) -> WireSession {
        if try gatewayFollowsRegistry() {
            throw .skip("the gateway follows its store's registry and refuses registrations it does not hold; this case needs one per device of its own users")
        }
        let credential = try registration(device: deviceID, user: user, tags: tags)
        let session = try connect(try gatewayEndpoint(), name: "gateway (device \(deviceID))", receiveBufferBytes: receiveBufferBytes)
        _ = try session.open(Self.hello(.device, credential: credential))
        return session
    }

    // MARK: credentials (SPEC.md section 7)

    /// A fresh provider credential for `audience` whose timestamp is `offsetMs` away from
    /// now ([7.1-1]).
    func providerCredential(for audience: CredentialAudience, offsetMs: Int64 = 0) throws(CaseStop) -> [UInt8] {
        let now = Int64(Clocks.wallMilliseconds()) + offsetMs
        return HelloCredential.provider(try keys().providerKey).make(for: audience, nowMs: UInt64(max(0, now)))
    }

    func registration(device: String, user: String, tags: [String] = [], expiresInMs: Int64 = 3_600_000) throws(CaseStop) -> [UInt8] {
        let signer = CredentialSigner(serverKey: try keys().serverKey, purpose: CredentialSigner.registrationPurpose)
        let now = Clocks.wallMilliseconds()
        let expiry = UInt64(max(1, Int64(now) + expiresInMs))
        return Registration(deviceID: device, user: user, tags: tags, issuedAt: now, expiresAt: expiry).signed(by: signer)
    }

    /// A fetch token as LOGIN would issue it ([7.3-1]), made with the deployment's key.
    func token(user: String, device: String, expiresInMs: Int64 = 3_600_000) throws(CaseStop) -> [UInt8] {
        let now = max(Clocks.wallMilliseconds(), run.registryIfOpen?.tokenNotBefore(user: user, device: device) ?? 0)
        let expiry = UInt64(max(1, Int64(now) + expiresInMs))
        return try forge { fields in
            fields += RawFrame.field(.user, string: user)
            fields += RawFrame.field(.deviceID, string: device)
            fields += RawFrame.field(.expiresAt, RawFrame.bigEndian(expiry))
            fields += RawFrame.field(.issuedAt, RawFrame.bigEndian(now))
        }
    }

    /// A signed credential with any body: format byte, fields, HMAC over both ([7.2-1]).
    /// `purpose` picks the derived key ([7.4-5]); the cases use it to build tokens a
    /// careful issuer never would.
    func forge(purpose: String = CredentialSigner.fetchTokenPurpose, format: UInt8 = 1, macCoversFormat: Bool = true,
               _ writeFields: (inout [UInt8]) -> Void) throws(CaseStop) -> [UInt8] {
        var fields: [UInt8] = []
        writeFields(&fields)
        let key = try keys().serverKey.derive(purpose: purpose).bytes
        let signed = [format] + fields
        return signed + HMACSHA256.authenticate(macCoversFormat ? signed : fields, key: key)
    }

    // MARK: store helpers

    /// STOREs a payload for `user` (the run's user by default) and remembers its id for
    /// cleanup. Anything but STORE_OK fails the case.
    func store(on session: WireSession, payload: [UInt8]? = nil, user: String? = nil, ttl: UInt32 = 600,
               readLimit: UInt32 = 0) throws(CaseStop) -> StoreOK {
        let recipient: String
        if let user { recipient = user } else { recipient = try self.user() }
        let body = payload ?? Array("conformance payload \(unique("p"))".utf8)
        let answer = try session.request(.store(StoreRequest(user: recipient, payload: body, ttlSeconds: ttl, readLimit: readLimit)))
        guard case .storeOK(let stored) = answer else {
            throw .fail("STORE for user \(recipient) was answered \(describe(answer)), expected STORE_OK")
        }
        storedIDs.append(stored.id)
        return stored
    }

    func noteStored(_ id: PayloadID) { storedIDs.append(id) }

    /// Closes every connection the case opened and recalls what it stored, best effort:
    /// a case's verdict never depends on its cleanup.
    func finish() {
        sessions = []
        guard !storedIDs.isEmpty, options.keys != nil, options.store != nil,
              let provider = try? storeProvider() else { return }
        let ids = storedIDs.map { _ in provider.takeCorrelation() }
        var bytes: [UInt8] = []
        for (id, correlation) in zip(storedIDs, ids) { Message.recall(Recall(id: id)).encode(correlation: correlation, into: &bytes) }
        try? provider.sendRaw(bytes)
        for correlation in ids { _ = try? provider.reply(to: correlation, waitingFor: "RECALL during cleanup") }
        storedIDs = []
        sessions = []
    }
}
