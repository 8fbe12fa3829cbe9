import PushEventLoop
import PushSecurity
import PushWire
import PushSession

/// Per-connection state the store keeps beyond the shared lifecycle.
public final class StoreSession {
    public let peerAddress: String
    public internal(set) var role: PeerRole
    /// The connection's frame size once HELLO_OK settled it: a REGISTRY_OK must fit.
    public internal(set) var maxFrame = FrameLimits.defaultMaxFrame
    // The last token that verified, so a device's stream of FETCHes pays for one HMAC.
    var verifiedToken: [UInt8] = []
    var verifiedClaims: FetchToken?
    /// LOGINs whose password is being checked off the loop, by their exact content.
    private var pendingLogins: [PendingLoginKey: PendingLogin] = [:]

    private struct PendingLoginKey: Hashable {
        var user: String
        var password: [UInt8]
        var deviceID: String

        init(_ login: Login) {
            user = login.user
            password = login.password
            deviceID = login.deviceID
        }
    }

    /// Which identity the password of a LOGIN was checked against. `finishLogin` is told
    /// only whether a password matched, not which hash it was checked against; while every
    /// identical LOGIN in flight was checked against the same identity, that is enough.
    struct PendingLogin {
        var userID: UInt64?
        var count: Int
        /// Identical LOGINs in flight were checked against different identities (the name
        /// was removed and added again meanwhile): none of them may be trusted.
        var mixed: Bool
    }

    public init(peerAddress: String, role: PeerRole) {
        self.peerAddress = peerAddress
        self.role = role
    }

    func startLogin(_ login: Login, userID: UInt64?) {
        let key = PendingLoginKey(login)
        var pending = pendingLogins[key] ?? PendingLogin(userID: userID, count: 0, mixed: false)
        pending.count += 1
        if pending.userID != userID { pending.mixed = true }
        pendingLogins[key] = pending
    }

    func finishLogin(_ login: Login) -> PendingLogin? {
        let key = PendingLoginKey(login)
        guard var pending = pendingLogins[key] else { return nil }
        pending.count -= 1
        pendingLogins[key] = pending.count > 0 ? pending : nil
        return pending
    }
}

/// How to answer a request once its write is durable.
public enum CommittedReply: Sendable, Equatable {
    case storeOK(StoreOK)
    case ackOK(PayloadID)
    case recallOK(PayloadID)

    public func message(for outcome: WriteOutcome) -> Message {
        switch (outcome, self) {
        case (.failed(let status), _): .error(ErrorReply(status: status))
        case (_, .storeOK(let reply)): .storeOK(reply)
        case (_, .ackOK(let id)): .ackOK(AckOK(id: id))
        case (_, .recallOK(let id)): .recallOK(RecallOK(id: id))
        }
    }
}

/// What the I/O layer is to do with a request: the store's logic never touches a socket.
public enum StoreAction: Equatable {
    case reply(Message)
    /// Commit durably, then reply.
    case commit(WriteOperation, CommittedReply)
    /// Check a password off the loop (a slow hash), then call `finishLogin`.
    case verifyPassword(Login, storedHash: String?)
    /// Nothing follows the REGISTRY's cursor: hold it until `registryReply` has entries or
    /// its wait is over ([4.16-8]).
    case hold(RegistryRequest)

    public static func == (lhs: StoreAction, rhs: StoreAction) -> Bool {
        switch (lhs, rhs) {
        case let (.reply(a), .reply(b)): a == b
        case let (.commit(_, a), .commit(_, b)): a == b
        case let (.verifyPassword(a, _), .verifyPassword(b, _)): a == b
        case let (.hold(a), .hold(b)): a == b
        default: false
        }
    }
}

/// What `StoreLogic.finishLogin` decided.
public struct LoginResult: Equatable {
    public var reply: Message
    /// Why the LOGIN was refused, for the operator's log; nil when it succeeded.
    public var refusal: LoginRefusal?
}

/// Why a LOGIN got BAD_CREDENTIALS; the peer is never told which ([4.6-2], [4.6-4]).
public enum LoginRefusal: String, Sendable {
    case wrongPassword = "unknown user or wrong password"
    /// The name was removed, or given to someone else, while the password was checked.
    case userChanged = "user removed during login"
    /// The password was right, but the registry holds no enrolled, unexpired
    /// registration of that device id for that user.
    case deviceNotEnrolled = "device not enrolled"
}

/// Why a genuinely issued, unexpired token got BAD_TOKEN ([7.3-3]).
public enum TokenRevocation: String, Sendable, CaseIterable {
    /// Its user was removed, or the name now belongs to a user added after the token.
    case userRemoved = "user removed"
    /// Its device's registration was revoked, expired, or replaced by a later enrolment.
    case deviceNotEnrolled = "device not enrolled"
}

/// The store's request logic (SPEC.md section 4): checks, reads and the decisions of
/// every message, as a function from (session, message) to an action. Owned by the
/// event loop's thread; reads go straight to the reader, writes become actions.
public final class StoreLogic {
    public let settings: StoreSettings
    let reader: PayloadReader
    private let tokenSigner: CredentialSigner
    private let providerCredentials: HelloCredential
    private let gatewayCredentials: HelloCredential
    /// Provider and gateway credentials accepted within their window, each once ([7.1-5]).
    private let replays = CredentialReplayGuard()
    private let clock: () -> UInt64
    /// FETCH statistics not yet handed to the writer ([4.8-3]: they may be written later,
    /// so a FETCH never waits for a write); STATUS adds them in, so it stays exact.
    private var fetchTallies: [UInt64: FetchTally] = [:]
    /// Every stored payload's sequence by ID. In an on-disk index random IDs would scatter,
    /// each STORE dirtying a page of its own; in memory they cost a hash insert instead.
    private var sequences: [PayloadID: UInt64] = [:]
    /// Users by name, forgotten as soon as any process changes the users table.
    private let users: UserDirectory
    /// Enrolled registrations by device id, forgotten as soon as the registry changes.
    private let devices: EnrolledDevices
    /// The registry's last change this store has noticed and reported.
    var noticedRegistrySequence: UInt64 = 0
    /// Told of every token refused because its user or its device's registration went
    /// away (the server logs and counts them).
    public var onTokenRevoked: ((TokenRevocation, FetchToken, StoreSession) -> Void)?
    private var ids = PayloadIDSource()
    private var loginThrottle: LoginThrottle
    /// BAD_TOKEN answers per client address: forged tokens are tried in bulk otherwise.
    private var badTokenLimiter: FailureWindowLimiter

    /// Reads every stored ID into memory first, and throws the reader's error if it cannot:
    /// without that map every stored payload would look unknown.
    public init(settings: StoreSettings, reader: PayloadReader, serverKey: SecretKey, providerKey: SecretKey,
                clock: @escaping () -> UInt64 = Clocks.wallMilliseconds) throws {
        self.settings = settings
        self.reader = reader
        self.tokenSigner = CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.fetchTokenPurpose)
        providerCredentials = HelloCredential.provider(providerKey)
        gatewayCredentials = HelloCredential.gateway(serverKey)
        self.clock = clock
        self.users = UserDirectory(reader: reader)
        self.devices = EnrolledDevices(reader: reader)
        self.loginThrottle = LoginThrottle(LoginThrottle.Settings(
            freeFailures: settings.loginFreeFailures, backoffMs: settings.loginBackoffMs, maxBackoffMs: settings.loginMaxBackoffMs,
            failuresPerAddress: settings.loginFailuresPerAddress, refillMs: settings.loginFailureRefillMs,
            trustedForMs: settings.loginTrustedForMs))
        self.badTokenLimiter = FailureWindowLimiter(limit: settings.badTokensPerAddress, windowMs: settings.badTokenWindowMs)
        let all = try reader.allIDs()
        sequences.reserveCapacity(all.count)
        for (id, sequence) in all { sequences[id] = sequence }
        noticedRegistrySequence = try reader.registrySequence()
    }

    /// The credential check of HELLO ([4.2-2], [4.2-3], [4.2-4], [7.1-5]): a device sends
    /// none to the store; a provider its provider credential, a gateway its own.
    public func admit(_ hello: Hello) -> HelloCredentialCheck {
        switch hello.role {
        case .device: .admit
        case .provider: providerCredentials.check(hello, for: .store, nowMs: clock(), replays: replays)
        case .gateway: gatewayCredentials.check(hello, for: .store, nowMs: clock(), replays: replays)
        }
    }

    /// A request after the handshake, whose role and service the session has checked
    /// ([4.1-5]): the message's own rules.
    public func handle(_ message: Message, session: StoreSession) -> StoreAction {
        do {
            // A STORE reads nothing: the writer checks its user.
            if case .store(let store) = message { return try handleStore(store) }
            let now = clock()
            guard users.isRefreshDue(nowMs: now, intervalMs: settings.usersRecheckMs) else { return try route(message, session: session) }
            // The revision check and the request's reads share one read transaction, so
            // the check costs little more than the `PRAGMA data_version` it is.
            return try reader.withSnapshot {
                try refreshDirectories(nowMs: now)
                return try route(message, session: session)
            }
        } catch let refusal as Refusal {
            return .reply(.error(ErrorReply(status: refusal.status, message: refusal.message)))
        } catch {
            return .reply(.error(ErrorReply(status: .internalError, message: "storage error")))
        }
    }

    /// Forgets the users and enrolled devices another process changed (one
    /// `PRAGMA data_version` when none did).
    private func refreshDirectories(nowMs: UInt64) throws {
        try users.refresh(nowMs: nowMs)
        try devices.refresh()
    }

    private func route(_ message: Message, session: StoreSession) throws -> StoreAction {
        switch message {
        case .login(let login): return try handleLogin(login, session: session)
        case .store(let store): return try handleStore(store)
        case .fetch(let fetch): return try handleFetch(fetch, session: session)
        case .sync(let sync): return try handleSync(sync, session: session)
        case .ack(let ack): return try handleAck(ack, session: session)
        case .recall(let recall):
            guard let sequence = try locate(recall.id, withBody: false)?.sequence else { throw Refusal(status: .notFound, message: "no such payload") }
            return .commit(.recall(sequence: sequence), .recallOK(recall.id))
        case .status(let request): return try handleStatus(request)
        case .registry(let request):
            let page = try registryPage(request, session: session)
            if page.entries.isEmpty && request.waitMs > 0 { return .hold(request) }
            return .reply(.registryOK(page))
        default: return .reply(.error(ErrorReply(status: .badRequest, message: "the store does not serve \(message.type)")))
        }
    }

    // MARK: requests

    private struct Refusal: Error {
        var status: Status
        var message: String
    }

    private func handleLogin(_ login: Login, session: StoreSession) throws -> StoreAction {
        let now = clock()
        switch loginThrottle.begin(user: login.user, address: session.peerAddress, nowMs: now) {
        case .refuse(let waitMs):
            throw Refusal(status: .rateLimited, message: "too many failed logins; try again in \((waitMs + 999) / 1000) s")
        case .check:
            let record = try users.record(of: login.user)
            session.startLogin(login, userID: record?.id)
            return .verifyPassword(login, storedHash: record?.passwordHash)
        }
    }

    /// Called back on the loop once the slow hash has been checked: the reply, and why it
    /// is a refusal if it is one (for the log only; the peer sees one BAD_CREDENTIALS).
    ///
    /// A right password with a device id that is not enrolled for that user is refused
    /// exactly like a wrong password and counts as a failure for the limits ([4.6-4]):
    /// were it not charged, a guesser using a made-up device id would see its backoff stop
    /// growing at the right password, and the limits would tell what the reply does not.
    public func finishLogin(_ login: Login, passwordMatched: Bool, session: StoreSession) -> LoginResult {
        let now = clock()
        let pending = session.finishLogin(login)
        func fail(_ reason: LoginRefusal) -> LoginResult {
            loginThrottle.finish(user: login.user, address: session.peerAddress, succeeded: false, nowMs: now)
            return LoginResult(reply: .error(ErrorReply(status: .badCredentials, message: "unknown user or wrong password")),
                               refusal: reason)
        }
        guard passwordMatched else { return fail(.wrongPassword) }
        // The password matched the identity the name had when the LOGIN arrived; the token
        // is only for that identity, so not if the name was removed (and perhaps given to
        // someone else) while the hash was being checked: asked afresh, however recently,
        // as is the device's registration.
        guard let pending, !pending.mixed, let checked = pending.userID,
              let (user, device) = try? reader.withSnapshot({ () throws -> (UserDirectory.Identity?, EnrolledDevice?) in
                  try refreshDirectories(nowMs: now)
                  return (try users.identity(of: login.user), try devices.enrolled(login.deviceID))
              }),
              let user, user.id == checked else { return fail(.userChanged) }
        guard let device, device.userID == user.id, device.expiresAt > now else { return fail(.deviceNotEnrolled) }
        loginThrottle.finish(user: login.user, address: session.peerAddress, succeeded: true, nowMs: now)
        // Never dated before the identity or the registration, whose clocks may run ahead
        // of this one's: the token must not look older than either ([7.3-3]).
        let issuedAt = max(now, user.createdAt, device.issuedAt)
        let token = FetchToken(user: login.user, deviceID: login.deviceID, issuedAt: issuedAt, expiresAt: issuedAt + settings.tokenLifetimeMs)
        return LoginResult(reply: .loginOK(LoginOK(token: token.signed(by: tokenSigner), expiresAt: token.expiresAt)), refusal: nil)
    }

    private func handleStore(_ store: StoreRequest) throws -> StoreAction {
        guard store.payload.count <= settings.maxPayloadBytes else {
            throw Refusal(status: .tooLarge, message: "payload over \(settings.maxPayloadBytes) bytes")
        }
        guard store.ttlSeconds > 0 else { throw Refusal(status: .badRequest, message: "ttl_s must be above 0") }
        // Whether the user exists is decided by the writer, in the transaction that stores
        // the payload (UNKNOWN_USER): the loop need not read anything for a STORE.
        let now = clock()
        let ttl = UInt64(min(store.ttlSeconds, settings.maxTTLSeconds))
        let payload = NewPayload(id: ids.next(), user: store.user, body: store.payload, createdAt: now,
                                 expiresAt: now + ttl * 1000, readLimit: store.readLimit)
        return .commit(.store(payload), .storeOK(StoreOK(id: payload.id, expiresAt: payload.expiresAt)))
    }

    /// The token checks shared by FETCH, SYNC and ACK ([4.8-1], [4.8-2], [7.3-3]), and the
    /// identity the token speaks for.
    private func holder(of token: [UInt8]?, session: StoreSession, nowMs: UInt64) throws -> (FetchToken, UserDirectory.Identity) {
        let claims = try claims(token, session: session, nowMs: nowMs)
        // A token outlives neither its user nor the user's name: once the user is removed,
        // or the name belongs to someone added after the token was issued, it is revoked.
        // Not counted against the address like a forged token: it was genuinely issued ([8-9]).
        guard let user = try users.identity(of: claims.user), claims.issuedAt >= user.createdAt else {
            throw revoked(claims, .userRemoved, session: session)
        }
        // Nor its device's registration: revoked, expired, or replaced by an enrolment
        // issued after the token.
        guard let device = try devices.enrolled(claims.deviceID), device.userID == user.id,
              device.issuedAt <= claims.issuedAt, device.expiresAt > nowMs else {
            throw revoked(claims, .deviceNotEnrolled, session: session)
        }
        return (claims, user)
    }

    private func revoked(_ claims: FetchToken, _ reason: TokenRevocation, session: StoreSession) -> Refusal {
        onTokenRevoked?(reason, claims, session)
        return Refusal(status: .badToken, message: "fetch token revoked: \(reason.rawValue)")
    }

    private func claims(_ token: [UInt8]?, session: StoreSession, nowMs: UInt64) throws -> FetchToken {
        guard let token else { throw Refusal(status: .authRequired, message: "log in to read this") }
        if badTokenLimiter.isLimited(session.peerAddress, nowMs: nowMs) {
            throw Refusal(status: .rateLimited, message: "too many rejected tokens from this address; try again later")
        }
        if let cached = session.verifiedClaims, session.verifiedToken == token {
            guard cached.expiresAt > nowMs else { throw Refusal(status: .tokenExpired, message: "fetch token expired") }
            return cached
        }
        do {
            let claims = try FetchToken.open(token, signer: tokenSigner, nowMs: nowMs)
            session.verifiedToken = token
            session.verifiedClaims = claims
            return claims
        } catch {
            if error.status == .badToken { badTokenLimiter.recordFailure(session.peerAddress, nowMs: nowMs) }
            throw Refusal(status: error.status, message: error.description)
        }
    }

    private func handleFetch(_ fetch: Fetch, session: StoreSession) throws -> StoreAction {
        let now = clock()
        let (_, user) = try holder(of: fetch.token, session: session, nowMs: now)
        guard let payload = try locate(fetch.id, withBody: true) else { throw Refusal(status: .notFound, message: "no such payload") }
        guard payload.userID == user.id else { throw Refusal(status: .forbidden, message: "not addressed to this user") }
        guard payload.isReadable(nowMs: now) else { throw Refusal(status: .gone, message: "expired, recalled or read") }
        let reply = FetchOK(id: fetch.id, payload: payload.body, createdAt: payload.createdAt, expiresAt: payload.expiresAt)
        countFetch(payload.sequence, atMs: now)
        return .reply(.fetchOK(reply))
    }

    private func handleSync(_ sync: Sync, session: StoreSession) throws -> StoreAction {
        let now = clock()
        let (claims, user) = try holder(of: sync.token, session: session, nowMs: now)
        let limit = Int(min(max(sync.limit, 1), Sync.maxLimit))
        let page = try reader.unread(userID: user.id, deviceID: claims.deviceID, after: sync.cursor, limit: limit, nowMs: now)
        return .reply(.syncOK(SyncOK(ids: page.ids, cursor: page.cursor, hasMore: page.hasMore)))
    }

    private func handleAck(_ ack: Ack, session: StoreSession) throws -> StoreAction {
        let now = clock()
        let (claims, user) = try holder(of: ack.token, session: session, nowMs: now)
        guard let sequence = try locate(ack.id, withBody: false)?.sequence else { throw Refusal(status: .notFound, message: "no such payload") }
        return .commit(.ack(sequence: sequence, userID: user.id, deviceID: claims.deviceID), .ackOK(ack.id))
    }

    private func countFetch(_ sequence: UInt64, atMs: UInt64) {
        fetchTallies[sequence, default: FetchTally(sequence: sequence, count: 0, lastAtMs: 0)].count += 1
        fetchTallies[sequence]?.lastAtMs = atMs
    }

    /// The stored payload with this ID; an entry whose row was swept is forgotten here.
    /// Only FETCH needs the body: the others leave it unread and unopened.
    func locate(_ id: PayloadID, withBody: Bool = true) throws -> StoredPayload? {
        guard let sequence = sequences[id] else { return nil }
        guard let payload = try reader.payload(sequence: sequence, withBody: withBody) else {
            sequences[id] = nil
            return nil
        }
        return payload
    }

    /// The reply to a request whose write is durable; a STORE's ID joins the map here, so
    /// it is readable exactly when the provider can know it.
    public func completed(_ reply: CommittedReply, outcome: WriteOutcome) -> Message {
        if case .stored(let sequence) = outcome, case .storeOK(let stored) = reply {
            sequences[stored.id] = sequence
        }
        return reply.message(for: outcome)
    }

    /// The statistics gathered since the last call, for one writer operation.
    public func takeFetchTallies() -> [FetchTally] {
        defer { fetchTallies = [:] }
        return Array(fetchTallies.values)
    }

    public var pendingFetchTallies: Int { fetchTallies.count }

    private func handleStatus(_ request: StatusRequest) throws -> StoreAction {
        guard var payload = try locate(request.id, withBody: false) else { throw Refusal(status: .notFound, message: "no such payload") }
        if let tally = fetchTallies[payload.sequence] {
            payload.fetchCount += tally.count
            payload.fetchedAt = max(payload.fetchedAt, tally.lastAtMs)
        }
        return .reply(.statusOK(StatusOK(id: request.id, state: payload.state(nowMs: clock()), fetchCount: payload.fetchCount,
                                         fetchedAt: payload.fetchedAt, createdAt: payload.createdAt, expiresAt: payload.expiresAt)))
    }

    /// Forgets what the login and token limits no longer need; the store calls it on a
    /// timer so the tables hold only recent offenders.
    public func pruneLimiters() {
        let now = clock()
        loginThrottle.prune(nowMs: now)
        badTokenLimiter.prune(nowMs: now)
    }

    /// (user, address) pairs and address budgets the login limits still remember.
    var loginFailureKeysTracked: Int { loginThrottle.trackedCount }

    /// Client addresses with a BAD_TOKEN window still remembered.
    var badTokenAddressesTracked: Int { badTokenLimiter.trackedCount }
}
