#if canImport(Glibc)
import Glibc
#endif
import PushClock
import PushSecurity
import PushSealing
import PushSession
import PushWire

/// The store's request logic (SPEC.md section 4): checks and decisions of every message,
/// as functions from (session, message, what was read) to an action. It reads nothing
/// itself: it names what a request needs (`StoreAction.read`) and decides once the
/// backend has read it (`resume`). Owned by the event loop's thread.
public final class StoreLogic {
    public let settings: StoreSettings
    private let tokenSigner: CredentialSigner
    private let providerCredentials: HelloCredential
    private let gatewayCredentials: HelloCredential
    /// The limits, the FETCH statistics not yet written ([4.8-3]: they may be written
    /// later, so a FETCH never waits for a write; STATUS adds them in, so it stays exact)
    /// and the credentials seen ([7.1-5]), shared with the process's other loops.
    private let shared: StoreProcessState
    private let clock: () -> UInt64
    /// Told of every token refused because its user or its device's registration went
    /// away (the server logs and counts them).
    public var onTokenRevoked: ((TokenRevocation, FetchToken, StoreSession) -> Void)?
    private var ids = PayloadIDSource()
    /// Seals a `payload_to_seal` to its audience's keys ([4.19-6]): PushSealing's `Sealer`;
    /// a test may put a stand-in here.
    public var arrivalSealer: ArrivalSealer = { content, recipient, devices in
        try Sealer.seal(content, recipient: recipient, devices: devices).bytes
    }

    /// `shared`: what the store's other loops share with this one; nil for a store on one loop.
    public init(settings: StoreSettings, serverKey: SecretKey, providerKey: SecretKey,
                clock: @escaping () -> UInt64 = Clocks.wallMilliseconds, shared: StoreProcessState? = nil) {
        self.settings = settings
        self.tokenSigner = CredentialSigner(serverKey: serverKey, purpose: CredentialSigner.fetchTokenPurpose)
        providerCredentials = HelloCredential.provider(providerKey)
        gatewayCredentials = HelloCredential.gateway(serverKey)
        self.clock = clock
        self.shared = shared ?? StoreProcessState(settings: settings)
    }

    /// The credential check of HELLO ([4.2-2], [4.2-3], [4.2-4], [7.1-5]): a device sends
    /// none to the store; a provider its provider credential, a gateway its own.
    public func admit(_ hello: Hello) -> HelloCredentialCheck {
        switch hello.role {
        case .device: .admit
        case .provider: providerCredentials.check(hello, for: .store, nowMs: clock(), replays: shared.replays)
        case .gateway: gatewayCredentials.check(hello, for: .store, nowMs: clock(), replays: shared.replays)
        }
    }

    /// A request after the handshake, whose role and service the session has checked
    /// ([4.1-5]): the checks that need no reads, then the reads it needs.
    public func handle(_ message: Message, session: StoreSession) -> StoreAction {
        do throws(Refusal) {
            switch message {
            case .store(let store): return try handleStore(store, session: session)
            case .send(let send): return try handleSend(send, session: session)
            case .login(let login):
                // A bad key is the request's fault, found with its body: before the limits and
                // the password, and counted in neither ([4.6-6]).
                guard StoreLogic.checkDeviceKey(login.deviceKey) else { throw Refusal(.badRequest, "device_key is of small order") }
                let limits = LoginLimitKey(user: login.user, address: LoginThrottle.addressKey(session.peerAddress))
                return .read(StoreReads(user: login.user, passwordHash: true, fresh: true, loginLimits: limits), .login(login))
            case .fetch(let fetch):
                let claims = try claims(fetch.token, session: session, nowMs: clock())
                return .read(StoreReads(user: claims.user, device: claims.deviceID, payload: fetch.id, body: true), .fetch(fetch, claims))
            case .sync(let sync):
                let now = clock()
                let claims = try claims(sync.token, session: session, nowMs: now)
                let limit = Int(min(max(sync.limit, 1), Sync.maxLimit))
                let unread = UnreadQuery(deviceID: claims.deviceID, cursor: sync.cursor, limit: limit, nowMs: now)
                return .read(StoreReads(user: claims.user, device: claims.deviceID, unread: unread), .sync(sync, claims))
            case .ack(let ack):
                let claims = try claims(ack.token, session: session, nowMs: clock())
                return .read(StoreReads(user: claims.user, device: claims.deviceID, payload: ack.id, sequenceOnly: true), .ack(ack, claims))
            // The row, not only its sequence: whose it is decides ([4.11-3]).
            case .recall(let recall): return .read(StoreReads(payload: recall.id), .recall(recall))
            case .status(let request): return .read(StoreReads(payload: request.id, pushOutcome: true), .status(request))
            case .registry(let request): return .read(registryReads(request, session: session), .registry(request))
            case .keys(let request): return .read(StoreReads(user: request.user, deviceKeys: true), .keys(request))
            default: return .reply(.error(ErrorReply(status: .badRequest, message: "the store does not serve \(message.type)")))
            }
        } catch {
            return .reply(.error(ErrorReply(status: error.status, message: error.message)))
        }
    }

    /// The decision on a request once its reads are done.
    public func resume(_ pending: PendingRequest, with read: Result<StoreReadResult, StoreBackendError>,
                       session: StoreSession) -> StoreAction {
        do throws(Refusal) {
            return try decide(pending, with: read, session: session)
        } catch {
            return .reply(.error(ErrorReply(status: error.status, message: error.message)))
        }
    }

    private func decide(_ pending: PendingRequest, with read: Result<StoreReadResult, StoreBackendError>,
                        session: StoreSession) throws(Refusal) -> StoreAction {
        guard case .success(let found) = read else {
            if case .confirmLogin(let login) = pending {
                return .loginDecided(failLogin(login, .userChanged, session: session, nowMs: clock()))
            }
            return .reply(.error(ErrorReply(status: .internalError, message: "storage error")))
        }
        let now = clock()
        switch pending {
            case .login(let login): return beginLogin(login, found: found, session: session, nowMs: now)
            case .confirmLogin(let login): return .loginDecided(confirmLogin(login, found: found, session: session, nowMs: now))
            case .fetch(let fetch, let claims):
                let user = try holder(claims, found: found, session: session, nowMs: now)
                guard let payload = found.payload else { throw Refusal(.notFound, "no such payload") }
                guard payload.userID == user.id else { throw Refusal(.forbidden, "not addressed to this user") }
                guard payload.admitsReader else { throw Refusal(.forbidden, "addressed to other devices of this user") }
                guard payload.isReadable(nowMs: now) else { throw Refusal(.gone, "expired, recalled or read") }
                if payload.sealed { return try fetchSealed(fetch, payload, device: found.device, nowMs: now) }
                countFetch(payload.sequence, atMs: now)
                return .reply(.fetchOK(FetchOK(id: fetch.id, payload: payload.body, createdAt: payload.createdAt, expiresAt: payload.expiresAt)))
            case .sync(let sync, let claims):
                _ = try holder(claims, found: found, session: session, nowMs: now)
                let page = found.unread ?? UnreadPage(ids: [], cursor: sync.cursor, hasMore: false)
                return .reply(.syncOK(SyncOK(ids: page.ids, cursor: page.cursor, hasMore: page.hasMore,
                                             olderCount: UInt32(clamping: page.older))))
            case .ack(let ack, let claims):
                let user = try holder(claims, found: found, session: session, nowMs: now)
                guard let sequence = found.payloadSequence else { throw Refusal(.notFound, "no such payload") }
                // Statistics that ride on the receipt are written with it, exactly as a batch
                // would write them; STATUS misses them only while that commit is in flight,
                // as it does while a batch is.
                let fetched = shared.state.withLock { $0.fetchTallies.removeValue(forKey: sequence) }
                return .commit(.ack(sequence: sequence, userID: user.id, deviceID: claims.deviceID, fetched: fetched,
                                    row: found.payload?.receiptRow), .ackOK(ack.id))
            case .recall(let recall):
                let payload = try askable(found, session: session)
                return .commit(.recall(sequence: payload.sequence), .recallOK(recall.id))
            case .status(let request): return try status(request, payload: try askable(found, session: session), nowMs: now)
            case .send(let send, let key):
                return try sendOnce(send, key: key, earlier: found.idempotency, enrolled: found.userDevices ?? [], keys: found.deviceKeys,
                                    session: session, nowMs: now)
            case .sealStore(let store):
                let payload = try newPayload(try sealedOnArrival(store, keys: found.deviceKeys, audience: .user, nowMs: now), session: session)
                return .commit(.store(payload), .storeOK(StoreOK(id: payload.id, expiresAt: payload.expiresAt)))
            case .keys(let request):
                guard found.user != nil, let keys = found.deviceKeys else { throw Refusal(.unknownUser, "no user \(request.user)") }
                return .reply(StoreLogic.keysReply(keys, nowMs: now, maxFrame: session.maxFrame))
            case .registry(let request):
                let page = found.registry ?? RegistryPage(entries: [], cursor: request.cursor, hasMore: false)
                if page.entries.isEmpty && request.waitMs > 0 { return .hold(request) }
                return .reply(.registryOK(RegistryOK(entries: page.entries, cursor: page.cursor, hasMore: page.hasMore)))
            }
    }

    // MARK: requests

    private struct Refusal: Error {
        var status: Status
        var message: String

        init(_ status: Status, _ message: String) {
            self.status = status
            self.message = message
        }
    }

    /// The login limits first ([8-5]), from the database when it keeps them for every
    /// store; then the password, off the loop.
    private func beginLogin(_ login: Login, found: StoreReadResult, session: StoreSession, nowMs: UInt64) -> StoreAction {
        let decision = shared.state.withLock {
            $0.logins.begin(user: login.user, address: session.peerAddress, nowMs: nowMs, shared: found.loginLimits)
        }
        switch decision {
        case .refuse(let waitMs):
            return .reply(.error(ErrorReply(status: .rateLimited, message: "too many failed logins; try again in \((waitMs + 999) / 1000) s")))
        case .check:
            session.startLogin(login, userID: found.user?.id, sharedLimits: found.loginLimits != nil)
            return .verifyPassword(login, storedHash: found.user?.passwordHash)
        }
    }

    /// Called back on the loop once the slow hash has been checked.
    ///
    /// A right password with a device id that is not enrolled for that user is refused
    /// exactly like a wrong password and counts as a failure for the limits ([4.6-4]):
    /// were it not charged, a guesser using a made-up device id would see its backoff stop
    /// growing at the right password, and the limits would tell what the reply does not.
    public func passwordChecked(_ login: Login, matched: Bool, session: StoreSession) -> StoreAction {
        guard matched else {
            let pending = session.finishLogin(login)
            return .loginDecided(failLogin(login, .wrongPassword, session: session, nowMs: clock(), shared: pending?.sharedLimits ?? false))
        }
        // The password matched the identity the name had when the LOGIN arrived; the token
        // is only for that identity, so not if the name was removed (and perhaps given to
        // someone else) while the hash was being checked: asked afresh, as is the device's
        // registration.
        return .read(StoreReads(user: login.user, fresh: true, device: login.deviceID), .confirmLogin(login))
    }

    private func confirmLogin(_ login: Login, found: StoreReadResult, session: StoreSession, nowMs: UInt64) -> LoginResult {
        let pending = session.finishLogin(login)
        let shared = pending?.sharedLimits ?? false
        guard let pending, !pending.mixed, let checked = pending.userID, let user = found.user, user.id == checked else {
            return failLogin(login, .userChanged, session: session, nowMs: nowMs, shared: shared)
        }
        guard let device = found.device, device.userID == user.id, device.expiresAt > nowMs else {
            return failLogin(login, .deviceNotEnrolled, session: session, nowMs: nowMs, shared: shared)
        }
        let change = finishLimits(login, session: session, succeeded: true, nowMs: nowMs)
        // Never dated before the identity or the registration, whose clocks may run ahead
        // of this one's: the token must not look older than either ([7.3-3]).
        let issuedAt = max(nowMs, user.createdAt, device.issuedAt)
        let token = FetchToken(user: login.user, deviceID: login.deviceID, issuedAt: issuedAt, expiresAt: issuedAt + settings.tokenLifetimeMs)
        // The key replaces the registration's, unless it is the one registered already
        // (the id names the suite, the device and the key, 7.6-2); without a key, the
        // registration keeps its own ([4.6-5], [4.6-7], [4.6-8]).
        let keyChange = login.deviceKey.map { DeviceKeyChange(deviceID: login.deviceID, issuedAt: device.issuedAt, key: $0) }
        let keyID = keyChange?.keyID ?? device.keyID
        return LoginResult(reply: .loginOK(LoginOK(token: token.signed(by: tokenSigner), expiresAt: token.expiresAt, keyID: keyID)),
                           refusal: nil, sharedAttempt: shared ? change : nil,
                           keyChange: keyChange?.keyID == device.keyID ? nil : keyChange)
    }

    /// The attempt counted by the rule in this process's limits; the change is what a
    /// database shared by stores writes too.
    private func finishLimits(_ login: Login, session: StoreSession, succeeded: Bool, nowMs: UInt64) -> LoginLimitChange {
        shared.state.withLock { $0.logins.finish(user: login.user, address: session.peerAddress, succeeded: succeeded, nowMs: nowMs) }
    }

    private func failLogin(_ login: Login, _ reason: LoginRefusal, session: StoreSession, nowMs: UInt64, shared: Bool = false) -> LoginResult {
        let change = finishLimits(login, session: session, succeeded: false, nowMs: nowMs)
        return LoginResult(reply: .error(ErrorReply(status: .badCredentials, message: "unknown user or wrong password")), refusal: reason,
                           sharedAttempt: shared ? change : nil)
    }

    private func handleStore(_ store: StoreRequest, session: StoreSession) throws(Refusal) -> StoreAction {
        if store.form == .sealOnArrival {
            // The keys are read first: the recipient's, every device of a STORE's audience ([4.9-4]).
            return .read(StoreReads(user: store.user, deviceKeys: true), .sealStore(store))
        }
        let payload = try newPayload(store, session: session)
        return .commit(.store(payload), .storeOK(StoreOK(id: payload.id, expiresAt: payload.expiresAt)))
    }

    /// The structure check of a sealed payload ([4.19-1]): its seal nonce, or BAD_REQUEST.
    private static func checkSealed(_ bytes: [UInt8]) throws(Refusal) -> ArraySlice<UInt8> {
        do { return try SealedPayload.check(bytes) } catch { throw Refusal(.badRequest, "malformed sealed_payload: \(error)") }
    }

    /// The id of a STORE's or SEND's content, by its form: drawn for a plain payload ([4.7-2]);
    /// for a sealed one, derived from its seal nonce once its structure is checked, before
    /// the recipient is looked up ([4.19-1], [4.19-2]).
    private func contentID(_ store: StoreRequest) throws(Refusal) -> PayloadID {
        switch store.form {
        case .plain: return ids.next()
        case .sealed: return SealedNames.payloadID(sealNonce: try StoreLogic.checkSealed(store.payload))
        case .sealOnArrival:
            // Sealed first (`sealedOnArrival`), then made a payload as a sealed one: never here.
            throw Refusal(.internalError, "payload_to_seal reached the payload unsealed")
        }
    }

    /// A `payload_to_seal` sealed to the keys the registry holds for the devices of its
    /// audience ([4.19-6]), as the sealed STORE it becomes: the content goes no further than
    /// the sealer. UNKNOWN_USER for an unknown recipient (`keys` nil), NO_DEVICE_KEYS when no
    /// device of the audience has a key, TOO_LARGE beyond 255.
    private func sealedOnArrival(_ store: StoreRequest, keys: UserKeys?, audience: PayloadAudience, nowMs: UInt64) throws(Refusal) -> StoreRequest {
        guard let keys else { throw Refusal(.unknownUser, "no user \(store.user)") }
        let devices = keys.keys.filter { key in
            guard key.expiresAt > nowMs else { return false }
            if case .devices(let listed) = audience { return listed.contains { $0.isExactly(key.deviceID) } }
            return true
        }.map { DeviceKeyEntry(deviceID: $0.deviceID, key: $0.key, keyID: $0.keyID) }
        guard !devices.isEmpty else { throw Refusal(.noDeviceKeys, "no device of the payload's audience has a key") }
        guard devices.count <= SealedPayload.maxStanzas else {
            throw Refusal(.tooLarge, "\(devices.count) devices have keys; a sealed payload holds at most \(SealedPayload.maxStanzas)")
        }
        var sealed = store
        do {
            sealed.payload = try arrivalSealer(store.payload, store.user, devices)
        } catch {
            throw Refusal(.internalError, "sealing failed")
        }
        sealed.form = .sealed
        return sealed
    }

    /// STORE's checks ([4.7-3], [4.7-4]) and the payload they allow, with the session's
    /// provider as its sender ([4.12-3]). Whether the user exists is decided by the writer,
    /// in the transaction that stores the payload (UNKNOWN_USER): a STORE reads nothing.
    private func newPayload(_ store: StoreRequest, session: StoreSession) throws(Refusal) -> NewPayload {
        let id = try contentID(store)
        // A sealed payload counts as it is kept, stanzas included ([4.19-3]).
        guard store.payload.count <= settings.maxPayloadBytes else { throw Refusal(.tooLarge, "payload over \(settings.maxPayloadBytes) bytes") }
        guard store.ttlSeconds > 0 else { throw Refusal(.badRequest, "ttl_s must be above 0") }
        let now = clock()
        let ttl = UInt64(min(store.ttlSeconds, settings.maxTTLSeconds))
        var payload = NewPayload(id: id, user: store.user, body: store.payload, createdAt: now,
                                 expiresAt: now + ttl * 1000, readLimit: store.readLimit, sender: session.provider.name)
        payload.sealed = store.form == .sealed
        return payload
    }

    /// FETCH of a sealed payload, once every other check of [4.8-1] has passed: the view with
    /// the stanza of the token device's current key ([4.19-4]); NOT_SEALED_FOR_DEVICE, not
    /// counted as a fetch, when it has no key or the payload no stanza for it ([4.8-3]).
    private func fetchSealed(_ fetch: Fetch, _ payload: StoredPayload, device: EnrolledDevice?, nowMs: UInt64) throws(Refusal) -> StoreAction {
        guard let keyID = device?.keyID else { throw Refusal(.notSealedForDevice, "this device has no key registered; log in with one") }
        // Checked when it was stored ([4.19-1]), so nil means no stanza for this key.
        guard let view = SealedPayload.deviceView(of: payload.body, for: keyID) else {
            throw Refusal(.notSealedForDevice, "not sealed for this device's key \(keyID)")
        }
        countFetch(payload.sequence, atMs: nowMs)
        return .reply(.fetchOK(FetchOK(id: fetch.id, payload: view, sealed: true, createdAt: payload.createdAt,
                                       expiresAt: payload.expiresAt)))
    }

    /// SEND: STORE's checks, the target's ([4.17-2]), then one commit of the payload and its
    /// push ([4.17-1]). The push reaches the recipient's devices only ([4.13-11]). With an
    /// idempotency key, its earlier use is read first ([4.17-5]).
    private func handleSend(_ send: SendRequest, session: StoreSession) throws(Refusal) -> StoreAction {
        guard settings.forwardsPushes else {
            throw Refusal(.badRequest, "this store hands no pushes to a gateway (start it with --gateway); use STORE and PUSH")
        }
        // A sealed payload's structure is a rule of the message, checked before anything is
        // read ([4.19-1]); its id is derived again when the payload is made.
        if send.form == .sealed { _ = try StoreLogic.checkSealed(send.payload) }
        let target = send.target ?? .user(send.user)
        guard !target.name.isEmpty else { throw Refusal(.badRequest, "the target is empty") }
        if case .user(let name) = target, !name.isExactly(send.user) {
            throw Refusal(.badRequest, "a SEND pushes to its recipient's devices only: target user \(name) is not the recipient")
        }
        let key = send.idempotencyKey.map { IdempotencyKey(scope: session.provider.idempotencyScope, key: $0) }
        let needsDevices = PayloadAudience.needsDevices(target)
        if send.form == .sealOnArrival {
            return .read(StoreReads(user: send.user, idempotency: key, userDevices: needsDevices, deviceKeys: true), .send(send, key))
        }
        if key != nil || needsDevices {
            return .read(StoreReads(user: needsDevices ? send.user : nil, idempotency: key, userDevices: needsDevices), .send(send, key))
        }
        return try commitSend(send, key: nil, enrolled: [], session: session, nowMs: clock())
    }

    /// A keyed SEND: the earlier one's answer, CONFLICT, BUSY while the earlier one is being
    /// committed, or a commit that records the key with the payload ([4.17-5], [4.17-6]).
    /// `keys`: the recipient's device keys, read for a SEND to be sealed on arrival.
    private func sendOnce(_ send: SendRequest, key: IdempotencyKey?, earlier: IdempotencyRecord?, enrolled: [UserDevice],
                          keys: UserKeys?, session: StoreSession,
                          nowMs: UInt64) throws(Refusal) -> StoreAction {
        if key != nil, let earlier, earlier.holds(atMs: nowMs) {
            guard earlier.requestHash == IdempotencyRecord.requestHash(send) else {
                throw Refusal(.conflict, "idempotency key already used, within 24 h, for a SEND with other content")
            }
            return .replay(SendOK(id: earlier.id, expiresAt: earlier.payloadExpiresAt, replayed: true), createdAt: earlier.sendCreatedAt)
        }
        return try commitSend(send, key: key, enrolled: enrolled, keys: keys, session: session, nowMs: nowMs,
                              forgotten: key == nil ? nil : earlier)
    }

    /// `enrolled`: the recipient's enrolled devices, read for a tag target only.
    /// `forgotten`: the earlier use of `key` the read found, past its expiry.
    private func commitSend(_ send: SendRequest, key: IdempotencyKey?, enrolled: [UserDevice], keys: UserKeys? = nil,
                            session: StoreSession, nowMs: UInt64, forgotten: IdempotencyRecord? = nil) throws(Refusal) -> StoreAction {
        // Who may see it, fixed now ([4.9-4]): a device enrolled later, or given the tag
        // later, is not its audience; a payload sealed on arrival is sealed to its keys.
        let audience = PayloadAudience.of(send.target ?? .user(send.user), enrolled: enrolled)
        var content = send.storeRequest
        if send.form == .sealOnArrival { content = try sealedOnArrival(content, keys: keys, audience: audience, nowMs: nowMs) }
        var payload = try newPayload(content, session: session)
        payload.audience = audience
        let push = Push(target: send.target ?? .user(send.user), id: payload.id.bytes, alert: send.alert, priority: send.priority,
                        collapseKey: send.collapseKey, ttlSeconds: send.pushTTLSeconds ?? send.ttlSeconds, user: send.user, once: true)
        payload.push = push
        if let key {
            // Held only once nothing can refuse the SEND: a refused SEND leaves its key free ([4.17-6]).
            let held = shared.state.withLock { $0.sendsInFlight.insert(key).inserted }
            guard held else { throw Refusal(.busy, "a SEND with this idempotency key is being committed; retry") }
            payload.idempotency = IdempotencyRecord(key: key, requestHash: IdempotencyRecord.requestHash(send), id: payload.id,
                                                    payloadExpiresAt: payload.expiresAt,
                                                    expiresAt: payload.createdAt + IdempotencyRecord.lifetimeMs)
            payload.keyTakenFromExpiry = forgotten?.expiresAt
        }
        return .commit(.store(payload), .sendOK(SendOK(id: payload.id, expiresAt: payload.expiresAt), push, createdAt: payload.createdAt,
                                                idempotency: key))
    }

    /// A RECALL is durable: a push for the payload still waiting on any loop is dropped ([4.17-4]).
    public func recalled(_ id: PayloadID) {
        if settings.forwardsPushes { shared.noteRecalled(id) }
    }

    /// Whether a waiting push's payload was recalled on some loop of this store.
    public func wasRecalled(_ id: PayloadID) -> Bool { settings.forwardsPushes && shared.wasRecalled(id) }

    /// A keyed SEND's commit has its outcome: the key is no longer in flight ([4.17-6]).
    public func sendCommitted(_ key: IdempotencyKey) {
        shared.state.withLock { _ = $0.sendsInFlight.remove(key) }
    }

    /// The identity a verified token speaks for ([7.3-3]), from what was read with the
    /// request.
    private func holder(_ claims: FetchToken, found: StoreReadResult, session: StoreSession, nowMs: UInt64) throws(Refusal) -> UserRecord {
        // A token outlives neither its user nor the user's name: once the user is removed,
        // or the name belongs to someone added after the token was issued, it is revoked.
        // Not counted against the address like a forged token: it was genuinely issued ([8-9]).
        guard let user = found.user, claims.issuedAt >= user.createdAt else { throw revoked(claims, .userRemoved, session: session) }
        // Nor its device's registration: revoked, expired, or replaced by an enrolment
        // issued after the token.
        guard let device = found.device, device.userID == user.id, device.issuedAt <= claims.issuedAt, device.expiresAt > nowMs else {
            throw revoked(claims, .deviceNotEnrolled, session: session)
        }
        return user
    }

    private func revoked(_ claims: FetchToken, _ reason: TokenRevocation, session: StoreSession) -> Refusal {
        onTokenRevoked?(reason, claims, session)
        return Refusal(.badToken, "fetch token revoked: \(reason.rawValue)")
    }

    /// Whether an address has had too many tokens refused lately, fetch tokens and the HTTP
    /// API's tokens alike: one limit for whoever guesses tokens.
    package func tokensLimited(address: String) -> Bool {
        shared.state.withLock { $0.badTokens.isLimited(address, nowMs: clock()) }
    }

    /// An HTTP API token refused (unknown, revoked or with the wrong secret): counted
    /// against the address as a forged fetch token is.
    package func apiTokenRefused(address: String) {
        tokenRefused(address: address, nowMs: clock())
    }

    /// Whether refused tokens are counted in the database too, so that every store of it
    /// keeps one limit per address ([8-9]): set from the backend at start.
    public var sharesTokenLimits = false

    private func tokenRefused(address: String, nowMs: UInt64) {
        let share = sharesTokenLimits
        shared.state.withLock {
            $0.badTokens.recordFailure(address, nowMs: nowMs)
            if share { $0.tokenFailuresToShare.recordFailure(address, nowMs: nowMs) }
        }
    }

    /// Refused tokens to count in the database, taken once: a window per address, counted
    /// by the rule the database's windows are merged with (`FailureWindow.merged`).
    public func takeTokenFailures() -> [KeyedFailureWindow] {
        shared.state.withLock { $0.tokenFailuresToShare.takeWindows() }
    }

    /// Addresses other stores of the database have limited ([8-9]).
    public func markLimited(_ addresses: [LimitedAddress]) {
        guard !addresses.isEmpty else { return }
        shared.state.withLock { state in
            for limited in addresses { state.badTokens.markLimited(limited.address, windowStart: limited.windowStart) }
        }
    }

    /// The token checks shared by FETCH, SYNC and ACK that need no reads ([4.8-1], [4.8-2]).
    private func claims(_ token: [UInt8]?, session: StoreSession, nowMs: UInt64) throws(Refusal) -> FetchToken {
        guard let token else { throw Refusal(.authRequired, "log in to read this") }
        if shared.state.withLock({ $0.badTokens.isLimited(session.peerAddress, nowMs: nowMs) }) {
            throw Refusal(.rateLimited, "too many rejected tokens from this address; try again later")
        }
        if let cached = session.verifiedClaims, StoreLogic.sameBytes(session.verifiedToken, token) {
            guard cached.expiresAt > nowMs else { throw Refusal(.tokenExpired, "fetch token expired") }
            return cached
        }
        do {
            let claims = try FetchToken.open(token, signer: tokenSigner, nowMs: nowMs)
            session.verifiedToken = token
            session.verifiedClaims = claims
            return claims
        } catch {
            if error.status == .badToken { tokenRefused(address: session.peerAddress, nowMs: nowMs) }
            throw Refusal(error.status, error.description)
        }
    }

    /// `==` on two byte arrays compares element by element; a token is compared on every
    /// FETCH and ACK. Not constant-time, like the `==` it replaces: the bytes compared
    /// against are a token this connection itself presented and had verified.
    static func sameBytes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in
                guard let left = x.baseAddress, let right = y.baseAddress else { return x.count == 0 }
                return memcmp(left, right, x.count) == 0
            }
        }
    }

    private func countFetch(_ sequence: UInt64, atMs: UInt64) {
        shared.state.withLock {
            $0.fetchTallies[sequence, default: FetchTally(sequence: sequence, count: 0, lastAtMs: 0)].count += 1
            $0.fetchTallies[sequence]?.lastAtMs = atMs
        }
    }

    /// The payload a STATUS or RECALL asks about, if its session's provider may see it
    /// ([4.11-3], [4.12-3]): another provider's payload is refused exactly as an id that does
    /// not exist, same status, same words, so that the reply tells nothing of its existence.
    private func askable(_ found: StoreReadResult, session: StoreSession) throws(Refusal) -> StoredPayload {
        guard let payload = found.payload, session.provider.mayAsk(about: payload.sender) else {
            throw Refusal(.notFound, "no such payload")
        }
        return payload
    }

    private func status(_ request: StatusRequest, payload found: StoredPayload, nowMs: UInt64) throws(Refusal) -> StoreAction {
        var payload = found
        let sequence = payload.sequence
        if let tally = shared.state.withLock({ $0.fetchTallies[sequence] }) {
            payload.fetchCount += tally.count
            payload.fetchedAt = max(payload.fetchedAt, tally.lastAtMs)
        }
        return .reply(.statusOK(StatusOK(id: request.id, state: payload.state(nowMs: nowMs), fetchCount: payload.fetchCount,
                                         fetchedAt: payload.fetchedAt, createdAt: payload.createdAt, expiresAt: payload.expiresAt,
                                         push: payload.push)))
    }

    /// The statistics gathered since the last call, for one writer operation.
    public func takeFetchTallies() -> [FetchTally] {
        shared.state.withLock { state in
            defer { state.fetchTallies = [:] }
            return Array(state.fetchTallies.values)
        }
    }

    public var pendingFetchTallies: Int { shared.state.withLock { $0.fetchTallies.count } }

    /// Forgets what the login and token limits no longer need; the store calls it on a
    /// timer so the tables hold only recent offenders.
    public func pruneLimiters() {
        let now = clock()
        shared.state.withLock {
            $0.logins.prune(nowMs: now)
            $0.badTokens.prune(nowMs: now)
        }
    }

    /// (user, address) pairs and address budgets the login limits still remember.
    var loginFailureKeysTracked: Int { shared.state.withLock { $0.logins.trackedCount } }

    /// Client addresses with a BAD_TOKEN window still remembered.
    var badTokenAddressesTracked: Int { shared.state.withLock { $0.badTokens.trackedCount } }
}
