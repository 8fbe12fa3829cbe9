/// The users a running store has looked up, by name, kept only while the users table is
/// unchanged: before each answer it asks the reader for the users revision (one
/// `PRAGMA data_version` while nothing was committed), so a user removed or added by
/// another process is seen by the very next request. Loop-confined.
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
    private var entries: [String: Identity?] = [:]

    init(reader: PayloadReader) {
        self.reader = reader
    }

    /// The current holder of `name`, or nil if there is none.
    func identity(of name: String) throws -> Identity? {
        try forgetIfChanged()
        if let known = entries[name] { return known }
        let found = try reader.user(named: name).map { Identity(id: $0.id, createdAt: $0.createdAt) }
        if entries.count >= UserDirectory.capacity { entries.removeAll(keepingCapacity: true) }
        entries[name] = .some(found)
        return found
    }

    /// The whole record, password hash included, read afresh (LOGIN only).
    func record(of name: String) throws -> UserRecord? {
        try forgetIfChanged()
        return try reader.user(named: name)
    }

    /// Made before every request that depends on users.
    func forgetIfChanged() throws {
        let current = try reader.usersRevision()
        guard current != revision else { return }
        entries.removeAll(keepingCapacity: true)
        revision = current
    }

    var cachedCount: Int { entries.count }
}
