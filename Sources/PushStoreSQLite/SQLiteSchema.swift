import CSQLite
import PushSecurity
import PushStoreLogic
import PushWire

/// The store database's tables, and the changes that bring a database written by an
/// earlier build up to them. `PRAGMA user_version` records how far a file has come.
enum SQLiteSchema {
    static let currentVersion: Int64 = 9

    /// Users have a random internal id that payloads bind to, so a name removed and added
    /// again is another user. `created_at` also dates the tokens a user may present: one
    /// issued earlier was issued to a previous holder of the name.
    static func usersTable(_ name: String) -> String {
        """
        CREATE TABLE \(name) (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            password_hash TEXT NOT NULL,
            created_at INTEGER NOT NULL
        )
        """
    }

    /// `key_id` names the data key that sealed `body`: NULL once the body is erased, 0 for
    /// a body written in clear by a build from before encryption (re-sealed in the background).
    static func payloadsTable(_ name: String) -> String {
        """
        CREATE TABLE \(name) (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id_high INTEGER NOT NULL,
            id_low INTEGER NOT NULL,
            user_id INTEGER NOT NULL,
            key_id INTEGER,
            body BLOB,
            created_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            read_limit INTEGER NOT NULL,
            read_count INTEGER NOT NULL DEFAULT 0,
            fetch_count INTEGER NOT NULL DEFAULT 0,
            fetched_at INTEGER NOT NULL DEFAULT 0,
            life INTEGER NOT NULL DEFAULT \(PayloadLife.live.rawValue),
            audience INTEGER NOT NULL DEFAULT 0
        )
        """
    }

    /// Which provider sent each payload (`ProviderIdentity.name`), written with the row: only
    /// that provider's STATUS and RECALL see it ([4.12-3]). NULL for a payload stored before
    /// senders were recorded, which any provider sees, as it did then. Added by a statement
    /// of its own, to a new file as to an old one, so that `payloadsTable` keeps the shape
    /// migration 2 copies into.
    static let senderColumn = "ALTER TABLE payloads ADD COLUMN sender TEXT"

    /// Who a payload is for ([4.9-4]): `payloads.audience` is `PayloadAudience.storedKind`, and
    /// a payload for listed devices has a row here for each, written in its STORE's
    /// transaction; a payload for the whole user (every STORE, most SENDs) has none.
    static let audiencesTable = """
        CREATE TABLE IF NOT EXISTS audiences (
            seq INTEGER NOT NULL,
            device TEXT NOT NULL,
            PRIMARY KEY (seq, device)
        ) WITHOUT ROWID
        """

    static let receiptsTable = """
        CREATE TABLE IF NOT EXISTS receipts (
            seq INTEGER NOT NULL,
            device TEXT NOT NULL,
            PRIMARY KEY (seq, device)
        ) WITHOUT ROWID
        """

    /// `users_revision` counts every change to the users table, whoever makes it: a running
    /// store compares it (after the cheap `PRAGMA data_version` says something was
    /// committed) to know when its cached users are stale. `removal_fence_ms` is one second
    /// past the last removal's commit: no user is created before it, so a name added again
    /// is dated after every token a store could still issue to the removed holder before it
    /// saw the removal, even on a clock that stepped back a little in between.
    static let metaAndTriggers = """
        CREATE TABLE store_meta (
            key TEXT PRIMARY KEY,
            value INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT INTO store_meta (key, value) VALUES ('users_revision', 1), ('removal_fence_ms', 0);
        CREATE TRIGGER users_added AFTER INSERT ON users
            BEGIN UPDATE store_meta SET value = value + 1 WHERE key = 'users_revision'; END;
        CREATE TRIGGER users_removed AFTER DELETE ON users
            BEGIN UPDATE store_meta SET value = value + 1 WHERE key = 'users_revision'; END;
        CREATE TRIGGER users_changed AFTER UPDATE ON users
            BEGIN UPDATE store_meta SET value = value + 1 WHERE key = 'users_revision'; END
        """

    /// No index on `key_id`: it would cost every STORE an index insert (about a fifth of
    /// its insert time) for the sake of rare key rotations, which walk the table by seq.
    static let indexes = """
        CREATE INDEX IF NOT EXISTS live_by_user ON payloads(user_id, seq) WHERE life = \(PayloadLife.live.rawValue);
        CREATE INDEX IF NOT EXISTS payloads_by_expiry ON payloads(expires_at)
        """

    /// A SEND's push intent and idempotency key, columns of its payload's row so that a SEND
    /// is one row written ([4.17-1], [4.17-5]): `push` the PUSH in its own field encoding,
    /// `outbox` its `OutboxState` (NULL for a STORE), the gateway's counts once answered
    /// ([4.12-2]); the key's scope and text, a digest of the SEND, and when the key is
    /// forgotten (NULL without a key). The key's id and the expiry it answers with are the
    /// row's own. Added by statements of their own, as `senderColumn` is.
    static let sendColumns: [(column: String, definition: String)] = [
        ("push", "BLOB"), ("outbox", "INTEGER"), ("written", "INTEGER NOT NULL DEFAULT 0"), ("queued", "INTEGER NOT NULL DEFAULT 0"),
        ("handed_at", "INTEGER NOT NULL DEFAULT 0"), ("key_scope", "TEXT"), ("idem_key", "TEXT"), ("request_hash", "BLOB"),
        ("key_expires_at", "INTEGER"),
    ]

    /// The waiting pushes in sequence order (what a restart reads, [4.17-4]), and the keys
    /// by (scope, key): one row per key, the unique index holding it until a later SEND
    /// with the key frees it (its expiry passed) or the row goes.
    static let sendIndexes = """
        CREATE INDEX IF NOT EXISTS payloads_waiting ON payloads(seq) WHERE outbox = \(OutboxState.waiting.rawValue);
        CREATE UNIQUE INDEX IF NOT EXISTS payloads_by_key ON payloads(key_scope, idem_key) WHERE idem_key IS NOT NULL
        """

    static func addSendColumns(_ connection: SQLiteConnection) throws(SQLiteError) {
        for (column, definition) in sendColumns {
            try connection.addColumnIfMissing(table: "payloads", column: column, definition: definition)
        }
        try connection.execute(sendIndexes)
    }

    /// Version 8: the outbox and the keys of version 4 move into their payloads' rows
    /// (a key whose payload is gone goes with it), and their tables are dropped.
    static func moveSendsIntoPayloads(_ connection: SQLiteConnection) throws(SQLiteError) {
        try addSendColumns(connection)
        // A file some tool shaped by hand may lack them: nothing to move then.
        try connection.execute(pushesTable)
        try connection.execute(idempotencyTable)
        try connection.execute("""
            UPDATE payloads SET push = o.push, outbox = o.state, written = o.written, queued = o.queued, handed_at = o.handed_at
            FROM pushes o WHERE o.seq = payloads.seq
            """)
        // Keys name their payload by id, which only the rows' two halves hold: matched here.
        var sequences: [PayloadID: Int64] = [:]
        let everyID = try connection.prepare("SELECT id_high, id_low, seq FROM payloads", persistent: false)
        while try everyID.step() {
            sequences[PayloadID(high: UInt64(bitPattern: everyID.int(0)), low: UInt64(bitPattern: everyID.int(1)))] = everyID.int(2)
        }
        everyID.reset()
        let keys = try connection.prepare("SELECT scope, key, request_hash, id, expires_at FROM idempotency_keys", persistent: false)
        var found: [(Int64, String, String, [UInt8], Int64)] = []
        while try keys.step() {
            guard let id = PayloadID(bytes: keys.blob(3)), let seq = sequences[id] else { continue }
            found.append((seq, keys.text(0), keys.text(1), keys.blob(2), keys.int(4)))
        }
        keys.reset()
        let move = try connection.prepare("""
            UPDATE payloads SET key_scope = ?, idem_key = ?, request_hash = ?, key_expires_at = ? WHERE seq = ?
            """, persistent: false)
        for (seq, scope, key, hash, expiresAt) in found {
            try move.run([.text(scope), .text(key), .blob(hash), .int(expiresAt), .int(seq)])
        }
        try connection.execute("DROP TABLE pushes; DROP TABLE idempotency_keys")
    }

    /// Version 4's outbox, kept for the migrations up to 8 that move it into `payloads`:
    /// the push of each payload a SEND stored, with the gateway's counts once answered.
    static let pushesTable = """
        CREATE TABLE IF NOT EXISTS pushes (
            seq INTEGER PRIMARY KEY,
            push BLOB NOT NULL,
            state INTEGER NOT NULL DEFAULT \(OutboxState.waiting.rawValue),
            written INTEGER NOT NULL DEFAULT 0,
            queued INTEGER NOT NULL DEFAULT 0,
            handed_at INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX IF NOT EXISTS pushes_waiting ON pushes(seq) WHERE state = \(OutboxState.waiting.rawValue)
        """

    /// Version 4's idempotency keys, kept for the migrations up to 8 as `pushesTable`.
    static let idempotencyTable = """
        CREATE TABLE IF NOT EXISTS idempotency_keys (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            request_hash BLOB NOT NULL,
            id BLOB NOT NULL,
            payload_expires_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL,
            PRIMARY KEY (scope, key)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS idempotency_keys_by_expiry ON idempotency_keys(expires_at)
        """

    /// Sealed payloads (SPEC.md 4.6-5, 4.18, 4.19): each registration's device key (its
    /// suite, its bytes and its id, all NULL without a key), each payload whether it is
    /// sealed; a sealed payload's id is unique among sealed ones (its sender derived it,
    /// [4.19-2]; a partial index costs a plain STORE nothing), and a user's registry entries
    /// by change number, whatever their state, for the key cursor ([4.18-3]). Added by
    /// statements of their own, to a new file as to an old one, as `sendColumns` are.
    static let sealingColumns: [(table: String, column: String, definition: String)] = [
        ("registrations", "key_suite", "INTEGER"), ("registrations", "device_key", "BLOB"), ("registrations", "key_id", "INTEGER"),
        ("payloads", "sealed", "INTEGER NOT NULL DEFAULT 0"),
    ]

    static let sealingIndexes = """
        CREATE UNIQUE INDEX IF NOT EXISTS payloads_sealed_id ON payloads(id_high, id_low) WHERE sealed = 1;
        CREATE INDEX IF NOT EXISTS registrations_user_changes ON registrations(user_id, change_seq)
        """

    static func addSealingColumns(_ connection: SQLiteConnection) throws(SQLiteError) {
        for (table, column, definition) in sealingColumns {
            try connection.addColumnIfMissing(table: table, column: column, definition: definition)
        }
        try connection.execute(sealingIndexes)
    }

    static var fresh: String {
        [usersTable("users"), payloadsTable("payloads"), senderColumn, receiptsTable, metaAndTriggers, indexes, RegistryTable.schema,
         APITokenTable.schema, audiencesTable]
            .joined(separator: ";\n")
    }

    /// Changes to databases written by earlier builds, by the `user_version` they lead to.
    static let migrations: [(version: Int64, apply: @Sendable (SQLiteConnection) throws(SQLiteError) -> Void)] = [
        // IDs are mapped to rows in memory now; the unique index on them only slowed STOREs.
        (1, { connection throws(SQLiteError) in try connection.execute("DROP INDEX IF EXISTS payloads_by_id") }),
        (2, addIdentities),
        // The device registry (SPEC.md 4.16): empty, since no earlier build recorded
        // enrolments; devices enrolled before must be enrolled again.
        (3, { connection throws(SQLiteError) in try connection.execute(RegistryTable.schema) }),
        // The outbox and the idempotency keys of SEND (SPEC.md 4.17).
        (4, { connection throws(SQLiteError) in
            try connection.execute(pushesTable)
            try connection.execute(idempotencyTable)
        }),
        // Provider API tokens, for the store's HTTP provider API.
        (5, { connection throws(SQLiteError) in try connection.execute(APITokenTable.schema) }),
        // Each payload's sender (SPEC.md 4.12-3); rows already there keep none.
        (6, { connection throws(SQLiteError) in try connection.execute(senderColumn) }),
        // Audiences of SENDs to a device or a tag (SPEC.md 4.9-4); payloads stored before
        // were all for their whole user, which the column's default says.
        (7, { connection throws(SQLiteError) in
            try connection.addColumnIfMissing(table: "payloads", column: "audience", definition: "INTEGER NOT NULL DEFAULT 0")
            try connection.execute(audiencesTable)
        }),
        // A SEND is one row: its push and key move into `payloads` (SPEC.md 4.17).
        (8, moveSendsIntoPayloads),
        // Device keys and sealed payloads (SPEC.md 4.18, 4.19): no registration has a key
        // until its device logs in with one, and every payload stored before is plain.
        (9, addSealingColumns),
    ]

    /// Creates the tables of a new file, or brings an existing one up to date, in one
    /// transaction so that two processes opening the file at once do it only once.
    static func prepare(_ connection: SQLiteConnection) throws(SQLiteError) {
        try connection.execute("BEGIN IMMEDIATE")
        do {
            let version = try connection.integer("PRAGMA user_version") ?? 0
            let hasTables = try connection.integer("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'payloads'") ?? 0
            if hasTables == 0 {
                try connection.execute(fresh)
                try addSendColumns(connection)
                try addSealingColumns(connection)
            } else {
                for migration in migrations where migration.version > version {
                    try migration.apply(connection)
                }
            }
            if version != currentVersion { try connection.execute("PRAGMA user_version = \(currentVersion)") }
            try connection.execute("COMMIT")
        } catch {
            try? connection.execute("ROLLBACK")
            throw error
        }
    }

    /// Version 2: users get random ids and payloads bind to them instead of to names.
    /// Payloads whose user no longer exists are deleted, not carried over: under the old
    /// schema they would have gone to whoever was next given the name.
    static func addIdentities(_ connection: SQLiteConnection) throws(SQLiteError) {
        try connection.execute(usersTable("users_v2"))
        do {
            let old = try connection.prepare("SELECT name, password_hash, created_at FROM users")
            let insert = try connection.prepare("INSERT INTO users_v2 (id, name, password_hash, created_at) VALUES (?, ?, ?, ?)")
            try old.bind([])
            var users: [(String, String, Int64)] = []
            while try old.step() { users.append((old.text(0), old.text(1), old.int(2))) }
            old.reset()
            for (name, hash, created) in users {
                try insert.run([.uint(try SQLiteError.reporting(UserIdentity.newID)), .text(name), .text(hash), .int(created)])
            }
        }
        try connection.execute("DROP TABLE users; ALTER TABLE users_v2 RENAME TO users")

        let lastSequence = try connection.integer("SELECT seq FROM sqlite_sequence WHERE name = 'payloads'") ?? 0
        try connection.execute(payloadsTable("payloads_v2"))
        try connection.execute("""
            INSERT INTO payloads_v2 (seq, id_high, id_low, user_id, key_id, body, created_at, expires_at,
                                     read_limit, read_count, fetch_count, fetched_at, life)
            SELECT p.seq, p.id_high, p.id_low, u.id, CASE WHEN p.body IS NULL THEN NULL ELSE 0 END, p.body,
                   p.created_at, p.expires_at, p.read_limit, p.read_count, p.fetch_count, p.fetched_at, p.life
            FROM payloads p JOIN users u ON u.name = p.user;
            DROP TABLE payloads;
            ALTER TABLE payloads_v2 RENAME TO payloads;
            DELETE FROM receipts WHERE seq NOT IN (SELECT seq FROM payloads);
            """)
        // Sequences never go back, even past deleted rows: a device's SYNC cursor is one.
        try connection.execute("""
            DELETE FROM sqlite_sequence WHERE name = 'payloads';
            INSERT INTO sqlite_sequence (name, seq) VALUES ('payloads', max(\(lastSequence), coalesce((SELECT max(seq) FROM payloads), 0)));
            """)
        try connection.execute(metaAndTriggers + ";\n" + indexes)
    }
}

extension SQLiteConnection {
    /// Adds a column unless the table has it: a table made again by an earlier migration
    /// (version 2 copies `payloads` into `payloadsTable`) has the current columns already.
    func addColumnIfMissing(table: String, column: String, definition: String) throws(SQLiteError) {
        let has = try integer("SELECT count(*) FROM pragma_table_info('\(table)') WHERE name = '\(column)'") ?? 0
        if has == 0 { try execute("ALTER TABLE \(table) ADD COLUMN \(column) \(definition)") }
    }

    /// The first column of the first row of `sql`, or nil without a row.
    func integer(_ sql: String) throws(SQLiteError) -> Int64? {
        let statement = try prepare(sql, persistent: false)
        defer { statement.reset() }
        return try statement.step() ? statement.int(0) : nil
    }
}
