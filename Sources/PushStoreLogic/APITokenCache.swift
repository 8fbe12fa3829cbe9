import PushSecurity

/// The API tokens one loop of the store has accepted, kept while the tokens' change cursor
/// (`StoreReads.apiTokensRevision`, advanced by every issue and revocation in its own
/// transaction) stands where it stood when they were read. Every request still asks the
/// cursor, as of the request, so a token revoked through any store or command of the
/// database is refused by every store on its very next request; what a request no longer
/// pays for is the token's row and the hash of its secret.
///
/// An entry holds the secret its token was last accepted with: a request presenting the
/// same bytes is that token (compared in constant time), any other is checked against the
/// stored hash again. Unknown ids are not kept, so a guesser costs a read each (and is
/// rate-limited by address). Loop-confined.
package final class APITokenCache {
    struct Entry {
        var record: APITokenRecord
        var secret: [UInt8]
    }

    /// Tokens kept at most before the cache starts over (deployments hold a handful).
    static let capacity = 1024

    /// The cursor the entries are valid at; nil before the first read.
    private(set) var revision: UInt64?
    private var entries: [String: Entry] = [:]

    package init() {}

    /// Takes the cursor as a request read it: everything kept is forgotten if it moved.
    package func observe(revision current: UInt64) {
        guard current != revision else { return }
        entries.removeAll(keepingCapacity: true)
        revision = current
    }

    /// The record of token `id`, if it is kept and `secret` is the one it was accepted
    /// with; nil sends the request to the token's row.
    package func accepted(id: String, secret: [UInt8]) -> APITokenRecord? {
        guard let entry = entries[id], entry.secret.count == secret.count else { return nil }
        let same = entry.secret.withUnsafeBytes { kept in secret.withUnsafeBytes { given in HMACSHA256.constantTimeEqual(kept, given) } }
        return same ? entry.record : nil
    }

    /// Whether token `id` is kept (its row need not be read to decide).
    package func holds(_ id: String) -> Bool { entries[id] != nil }

    /// A token read at `revision` and accepted with `secret`.
    package func remember(_ record: APITokenRecord, secret: [UInt8], readAt revision: UInt64) {
        observe(revision: revision)
        if entries.count >= APITokenCache.capacity { entries.removeAll(keepingCapacity: true) }
        entries[record.id] = Entry(record: record, secret: secret)
    }

    var count: Int { entries.count }
}
