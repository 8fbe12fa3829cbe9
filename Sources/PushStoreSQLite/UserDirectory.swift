import PushStoreLogic
import PushWire

/// The users a running store has looked up, by name, kept only while the users table is
/// unchanged: `refresh` asks the reader for the users revision (one `PRAGMA data_version`
/// while nothing was committed) and forgets everything when it moved. The store refreshes
/// before a request when its clock has moved on by `StoreSettings.usersRecheckMs` since
/// the last time, so a user removed or added by another process is seen within that.
/// Loop-confined.
final class UserDirectory {
    /// What a request needs of a user: its identity, and the date before which a token
    /// for its name was issued to someone else.
    struct Identity: Equatable {
        var id: UInt64
        var createdAt: UInt64
    }

    /// Names remembered at most, present or not, before the cache starts over.
    static let capacity = 100_000

    private let reader: PayloadReader
    private var revision: UInt64?
    private var refreshedAtMs: UInt64?
    /// By exact name ([3.3-8]): "zoë" in NFC and in NFD are two users.
    private var entries: [ExactName: Identity?] = [:]

    init(reader: PayloadReader) {
        self.reader = reader
    }

    /// Whether `refresh` is due at `nowMs` (a clock stepped back makes it due).
    func isRefreshDue(nowMs: UInt64, intervalMs: UInt64) -> Bool {
        guard let last = refreshedAtMs else { return true }
        return intervalMs == 0 || nowMs < last || nowMs - last >= intervalMs
    }

    /// The current holder of `name`, or nil if there is none, as of the last `refresh`.
    func identity(of name: String) throws -> Identity? {
        let key = ExactName(name)
        if let known = entries[key] { return known }
        let found = try reader.user(named: name).map { Identity(id: $0.id, createdAt: $0.createdAt) }
        if entries.count >= UserDirectory.capacity { entries.removeAll(keepingCapacity: true) }
        entries[key] = .some(found)
        return found
    }

    /// The whole record, password hash included, read afresh (LOGIN only).
    func record(of name: String) throws -> UserRecord? {
        try reader.user(named: name)
    }

    /// Forgets what it knows if any process changed the users since the last call.
    func refresh(nowMs: UInt64) throws {
        let current = try reader.usersRevision()
        refreshedAtMs = nowMs
        guard current != revision else { return }
        entries.removeAll(keepingCapacity: true)
        revision = current
    }

    var cachedCount: Int { entries.count }
}
