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
    private var sequences: [PayloadID: UInt64] = [:]
    private let recheckMs: UInt64
    private let clock: () -> UInt64
    /// The registry's last change when it started.
    public let registrySequenceAtStart: UInt64

    /// Reads every stored ID first, and throws the reader's error if it cannot: without
    /// that map every stored payload would look unknown.
    public init(reader: PayloadReader, recheckMs: UInt64, clock: @escaping () -> UInt64) throws {
        self.reader = reader
        self.recheckMs = recheckMs
        self.clock = clock
        users = UserDirectory(reader: reader)
        devices = EnrolledDevices(reader: reader)
        let all = try reader.allIDs()
        sequences.reserveCapacity(all.count)
        for (id, sequence) in all { sequences[id] = sequence }
        registrySequenceAtStart = try reader.registrySequence()
    }

    /// What `reads` names, in one read transaction when the users' and registry's
    /// revisions are to be checked.
    public func read(_ reads: StoreReads) throws -> StoreReadResult {
        let now = clock()
        // The revision check and the request's reads share one read transaction, so the
        // check costs little more than the `PRAGMA data_version` it is.
        let refreshDue = reads.fresh || (reads.user != nil || reads.device != nil) && users.isRefreshDue(nowMs: now, intervalMs: recheckMs)
        guard refreshDue else {
            return try readNow(reads)
        }
        return try reader.withSnapshot {
            try users.refresh(nowMs: now)
            try devices.refresh()
            return try readNow(reads)
        }
    }

    private func readNow(_ reads: StoreReads) throws -> StoreReadResult {
        var found = StoreReadResult()
        if let name = reads.user {
            if reads.fresh {
                found.user = try reader.user(named: name)
            } else if let identity = try users.identity(of: name) {
                found.user = UserRecord(id: identity.id, name: name, passwordHash: "", createdAt: identity.createdAt)
            }
        }
        if let deviceID = reads.device { found.device = reads.fresh ? try reader.enrolledDevice(deviceID) : try devices.enrolled(deviceID) }
        if let id = reads.payload {
            // A row swept meanwhile is caught by the writer, which looks the row up again
            // in the transaction that would change it (NOT_FOUND there as here).
            if reads.sequenceOnly && !reads.body {
                found.sequence = sequences[id]
            } else {
                found.payload = try payload(id, withBody: reads.body)
            }
        }
        if let unread = reads.unread, let user = found.user {
            found.unread = try reader.unread(userID: user.id, deviceID: unread.deviceID, after: unread.cursor, limit: unread.limit,
                                             nowMs: unread.nowMs)
        }
        if let query = reads.registry {
            found.registry = try reader.registryChanges(after: query.cursor, limit: query.limit, maxBytes: query.maxBytes)
        }
        return found
    }

    /// The stored payload with this ID; an entry whose row was swept is forgotten here.
    func payload(_ id: PayloadID, withBody: Bool) throws -> StoredPayload? {
        guard let sequence = sequences[id] else { return nil }
        guard let payload = try reader.payload(sequence: sequence, withBody: withBody) else {
            sequences[id] = nil
            return nil
        }
        return payload
    }

    /// The ID joins the map here, so it is readable exactly when the provider can know it.
    public func stored(_ id: PayloadID, sequence: UInt64) {
        sequences[id] = sequence
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

    /// Users and devices looked up and remembered (for tests).
    var cachedLookups: (users: Int, devices: Int) { (users.cachedCount, devices.cachedCount) }
}
