import PushStoreLogic
import PushWire

/// The store's persistence, split by thread: the writer thread owns a `PayloadWriter`,
/// the event loop a `PayloadReader`. SQLite is the one backend; another would implement
/// the same pair.
public protocol PayloadWriter: AnyObject {
    /// Applies every operation in one durable transaction; outcomes match by index.
    func commit(_ operations: [WriteOperation]) throws -> [WriteOutcome]
    /// Empties payloads past their TTL and forgets long-dead ones (and revoked
    /// registrations that have expired); returns how many payloads were emptied.
    func sweepExpired(nowMs: UInt64) throws -> Int
    /// One small step of background work, done while no write waits (re-sealing rows under
    /// an older data key); true while more remains.
    func idleStep(nowMs: UInt64) throws -> Bool
}

extension PayloadReader {
    public func payload(sequence: UInt64) throws -> StoredPayload? { try payload(sequence: sequence, withBody: true) }
}

extension PayloadWriter {
    public func idleStep(nowMs: UInt64) throws -> Bool { false }
}

public protocol PayloadReader: AnyObject {
    /// The payload stored as `sequence` (the store keeps the ID-to-sequence map in memory,
    /// so random IDs never have to be indexed on disk); without `withBody` its body is left
    /// empty, neither read nor opened.
    func payload(sequence: UInt64, withBody: Bool) throws -> StoredPayload?
    /// Every stored ID and its sequence, to rebuild that map at start.
    func allIDs() throws -> [(PayloadID, UInt64)]
    /// SYNC's page ([4.9-1]): IDs for the user that are live, of an audience that admits
    /// `deviceID`, and that it has not acknowledged, newest first, below `query.before`.
    func unread(userID: UInt64, _ query: UnreadQuery) throws -> UnreadPage
    /// Whether `deviceID` is listed in the audience of the payload stored as `sequence`.
    func audienceLists(sequence: UInt64, deviceID: String) throws -> Bool
    /// The devices of the registry enrolled for `userID`, with their tags.
    func enrolledDevices(userID: UInt64) throws -> [UserDevice]
    func user(named name: String) throws -> UserRecord?
    /// A number that changes whenever a user is added or removed, by this process or any
    /// other. Asked before every request that depends on users, so it must be cheap when
    /// nothing changed.
    func usersRevision() throws -> UInt64
    /// The number of the registry's last change, by this process or any other; asked
    /// before every request that depends on the registry, and on a short timer while a
    /// REGISTRY is held, so it must be cheap when nothing changed.
    func registrySequence() throws -> UInt64
    /// The enrolled registration of `deviceID`, if the registry holds one.
    func enrolledDevice(_ deviceID: String) throws -> EnrolledDevice?
    /// Registry entries changed after `cursor`, oldest change first: at most `limit`, and
    /// no more than fit a reply of `maxBytes` (at least one when one follows).
    func registryChanges(after cursor: UInt64, limit: Int, maxBytes: Int) throws -> RegistryPage
    /// How the changes after `cursor` left their registrations (for the log).
    func registryChangeCounts(after cursor: UInt64) throws -> RegistryChangeCounts
    /// Runs `body` with every read it makes seeing one snapshot, so that a request pays for
    /// one read transaction however many reads it makes.
    func withSnapshot<T>(_ body: () throws -> T) throws -> T
    /// What became of the push of the payload stored as `sequence` ([4.12-2]).
    func pushOutcome(sequence: UInt64) throws -> PushOutcome
    /// Outbox pushes no gateway has answered, after `cursor` in sequence order, whose
    /// payload is still live at `nowMs` ([4.17-4]): at most `limit`.
    func waitingPushes(after cursor: UInt64, limit: Int, nowMs: UInt64) throws -> [OutboxEntry]
    /// The SEND recorded with `key`, expired or not ([4.17-5]).
    func idempotencyRecord(_ key: IdempotencyKey) throws -> IdempotencyRecord?
    /// The provider API token with this id, revoked or not.
    func apiToken(id: String) throws -> APITokenRecord?
    /// The keys of the user's enrolled registrations and the user's key cursor (KEYS, [4.18]).
    func deviceKeys(userID: UInt64) throws -> UserKeys
    /// The API tokens' change cursor, by this process or any other; asked with every
    /// request that presents a token, so it must be cheap when nothing changed.
    func apiTokensRevision() throws -> UInt64
}

extension PayloadReader {
    public func apiToken(id: String) throws -> APITokenRecord? { nil }
    public func apiTokensRevision() throws -> UInt64 { 0 }
    public func deviceKeys(userID: UInt64) throws -> UserKeys { UserKeys(keys: [], cursor: 0) }
    public func withSnapshot<T>(_ body: () throws -> T) throws -> T { try body() }
}
