import PushStoreLogic
import PushWire

/// The reads of a store on SQLite, synchronous, on the loop's own connection.
///
/// It keeps in memory what the database would index poorly or read too often: every
/// payload ID's row (random IDs would scatter an on-disk index, each STORE dirtying a page
/// of its own), and the users and enrolled devices looked up, forgotten whenever any
/// process changes them (checked at most every `StoreSettings.usersRecheckMs`).
public final class SQLiteStoreReads {
    private let reader: PayloadReader
    private let users: UserDirectory
    private let devices: EnrolledDevices
    private let sequences: PayloadSequences
    private let recheckMs: UInt64
    private let clock: () -> UInt64
    /// The registry's last change when it started.
    public let registrySequenceAtStart: UInt64

    /// Reads every stored ID first (unless the map is shared with other loops, which read
    /// it already), and throws the reader's error if it cannot: without that map every
    /// stored payload would look unknown.
    public init(reader: PayloadReader, recheckMs: UInt64, clock: @escaping () -> UInt64, sequences: PayloadSequences? = nil) throws {
        self.reader = reader
        self.recheckMs = recheckMs
        self.clock = clock
        users = UserDirectory(reader: reader)
        devices = EnrolledDevices(reader: reader)
        self.sequences = try sequences ?? PayloadSequences(reader: reader)
        registrySequenceAtStart = try reader.registrySequence()
    }

    /// What `reads` names, in one read transaction when the users' and registry's
    /// revisions are to be checked.
    public func read(_ reads: StoreReads) throws -> StoreReadResult {
        let now = clock()
        // The revision check and the request's reads share one read transaction, so the
        // check costs little more than the `PRAGMA data_version` it is.
        let refreshDue = reads.fresh || (reads.user != nil || reads.device != nil) && users.isRefreshDue(nowMs: now, intervalMs: recheckMs)
        // A request authenticated by an API token is read with its token as of one moment.
        guard refreshDue || reads.apiToken != nil else {
            return try readNow(reads)
        }
        return try reader.withSnapshot {
            if refreshDue {
                try users.refresh(nowMs: now)
                try devices.refresh()
            }
            return try readNow(reads)
        }
    }

    private func readNow(_ reads: StoreReads) throws -> StoreReadResult {
        // Built once, at the end, in the caller's slot: filling in a `StoreReadResult`
        // field by field copies each large optional through a temporary.
        var user: UserRecord?
        if let name = reads.user {
            if reads.fresh {
                user = try reader.user(named: name)
            } else if let identity = try users.identity(of: name) {
                user = UserRecord(id: identity.id, name: name, passwordHash: "", createdAt: identity.createdAt)
            }
        }
        var device: EnrolledDevice?
        if let deviceID = reads.device { device = reads.fresh ? try reader.enrolledDevice(deviceID) : try devices.enrolled(deviceID) }
        var payload: StoredPayload?
        var sequence: UInt64?
        if let id = reads.payload {
            // A row swept meanwhile is caught by the writer, which looks the row up again
            // in the transaction that would change it (NOT_FOUND there as here).
            if reads.sequenceOnly && !reads.body {
                sequence = sequences[id]
            } else {
                payload = try self.payload(id, withBody: reads.body)
                if let deviceID = reads.device, let found = payload, found.listedAudience {
                    payload?.readerListed = try reader.audienceLists(sequence: found.sequence, deviceID: deviceID)
                }
                if reads.pushOutcome, let sequence = payload?.sequence { payload?.push = try reader.pushOutcome(sequence: sequence) }
            }
        }
        var unread: UnreadPage?
        if let query = reads.unread, let user {
            unread = try reader.unread(userID: user.id, query)
        }
        var userDevices: [UserDevice]?
        if reads.userDevices { userDevices = try user.map { try reader.enrolledDevices(userID: $0.id) } ?? [] }
        var deviceKeys: UserKeys?
        if reads.deviceKeys, let user { deviceKeys = try reader.deviceKeys(userID: user.id) }
        var registry: RegistryPage?
        if let query = reads.registry {
            registry = try reader.registryChanges(after: query.cursor, limit: query.limit, maxBytes: query.maxBytes)
        }
        let idempotency = try reads.idempotency.flatMap { try reader.idempotencyRecord($0) }
        let apiToken = try reads.apiToken.flatMap { try reader.apiToken(id: $0) }
        let apiTokensRevision = reads.apiTokensRevision ? try reader.apiTokensRevision() : nil
        return StoreReadResult(user: user, device: device, payload: payload, sequence: sequence, unread: unread,
                               registry: registry, idempotency: idempotency, apiToken: apiToken, apiTokensRevision: apiTokensRevision,
                               userDevices: userDevices, deviceKeys: deviceKeys)
    }

    /// The stored payload with this ID; an entry whose row was swept is forgotten here.
    func payload(_ id: PayloadID, withBody: Bool) throws -> StoredPayload? {
        guard let sequence = sequences[id] else { return nil }
        guard let payload = try reader.payload(sequence: sequence, withBody: withBody) else {
            sequences.set(id, nil)
            return nil
        }
        return payload
    }

    /// The ID joins the map here, so it is readable exactly when the provider can know it.
    public func stored(_ id: PayloadID, sequence: UInt64) {
        sequences.set(id, sequence)
    }

    /// The registry's changes after `cursor`, or nil if there are none: one
    /// `PRAGMA data_version` when nothing was committed.
    public func registryNotice(after cursor: UInt64) throws -> RegistryNotice? {
        try reader.withSnapshot { () throws -> RegistryNotice? in
            let current = try reader.registrySequence()
            guard current != cursor else { return nil }
            return RegistryNotice(from: cursor, to: current, counts: try reader.registryChangeCounts(after: cursor))
        }
    }

    /// Outbox pushes waiting for a gateway, after `cursor` ([4.17-4]).
    public func waitingPushes(after cursor: UInt64, limit: Int) throws -> [OutboxEntry] {
        try reader.withSnapshot { try reader.waitingPushes(after: cursor, limit: limit, nowMs: clock()) }
    }

    /// Users and devices looked up and remembered (for tests).
    var cachedLookups: (users: Int, devices: Int) { (users.cachedCount, devices.cachedCount) }
}
