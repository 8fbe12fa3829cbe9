import PushPostgres
import PushStoreLogic
import PushWire

/// Why the store's tables could not be checked or brought up to date.
public enum PostgresSchemaError: Error, CustomStringConvertible, Sendable {
    /// The database was migrated by a later build: this one does not know its tables.
    case newer(found: Int64, known: Int64)
    case database(PostgresError)

    public var description: String {
        switch self {
        case .newer(let found, let known):
            "the database's schema is version \(found), newer than this build knows (\(known)): run a build at least as recent"
        case .database(let error): "\(error)"
        }
    }
}

/// The store's tables in PostgreSQL, and the numbered migrations that lead to them. Each
/// migration applied is a row of `schema_version`; they are applied in one transaction
/// under an advisory lock, so two stores (or a store and `securepush init`) starting at
/// once migrate once, and a build refuses a database a later build migrated.
///
/// Every store of the database serves every payload, so a payload is found by its ID
/// through the unique index (no in-memory map as on SQLite), and everything the stores
/// must agree on lives here: users, payloads and their receipts, the registry, the
/// removal fence and the login limits.
public enum PostgresSchema {
    /// The version this build writes and reads.
    public static let currentVersion: Int64 = 10

    /// `pg_advisory_xact_lock` key of migrations ("securepu" in ASCII): any constant the
    /// deployment's other users of the database do not take.
    static let migrationLock: Int64 = 0x7365_6375_7265_7075

    /// Migrations by the version they lead to, oldest first.
    static let migrations: [(version: Int64, sql: String)] = [(1, version1), (2, version2), (3, version3), (4, version4), (5, version5),
                                                                 (6, version6), (7, version7), (8, version8),
                                                                 (9, version9), (10, version10)]

    /// Users have a random 63-bit id that payloads and registrations bind to, so a name
    /// removed and added again is another user; `created_at` dates the tokens a holder may
    /// present. `store_meta` holds the registry's change counter (every registry change
    /// takes its row lock, so changes commit in the order of their numbers and a REGISTRY
    /// cursor never passes one still to commit) and the removal fence (one second past the
    /// last removal: a user created later is dated after every token a store could still
    /// issue the removed holder).
    ///
    /// Payloads reference their user and receipts their payload with ON DELETE CASCADE:
    /// removing a user takes its payloads with it, and a STORE committing as the user is
    /// removed either lands before the removal (and goes with it) or fails its foreign key.
    /// `key_id` names the data key that sealed `body`, NULL once the body is erased. `life`
    /// is `PayloadLife`. Sealed bodies do not compress, so they are stored uncompressed.
    static let version1 = """
        CREATE TABLE store_meta (
            key text PRIMARY KEY,
            value bigint NOT NULL
        );
        INSERT INTO store_meta (key, value) VALUES ('registry_seq', 0), ('removal_fence_ms', 0);
        CREATE TABLE users (
            id bigint PRIMARY KEY,
            name text NOT NULL UNIQUE,
            password_hash text NOT NULL,
            created_at bigint NOT NULL
        );
        CREATE TABLE payloads (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id bytea NOT NULL UNIQUE CHECK (octet_length(id) = 16),
            user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
            key_id bigint,
            body bytea,
            created_at bigint NOT NULL,
            expires_at bigint NOT NULL,
            read_limit bigint NOT NULL,
            read_count bigint NOT NULL DEFAULT 0,
            fetch_count bigint NOT NULL DEFAULT 0,
            fetched_at bigint NOT NULL DEFAULT 0,
            life integer NOT NULL DEFAULT \(PayloadLife.live.rawValue)
        );
        ALTER TABLE payloads ALTER COLUMN body SET STORAGE EXTERNAL;
        CREATE INDEX payloads_by_user ON payloads (user_id, seq);
        CREATE INDEX payloads_by_expiry ON payloads (expires_at);
        CREATE TABLE receipts (
            seq bigint NOT NULL REFERENCES payloads (seq) ON DELETE CASCADE,
            device text NOT NULL,
            PRIMARY KEY (seq, device)
        );
        CREATE TABLE registrations (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            change_seq bigint NOT NULL UNIQUE,
            state integer NOT NULL,
            device_id text NOT NULL,
            user_id bigint NOT NULL,
            user_name text NOT NULL,
            tags text NOT NULL,
            issued_at bigint NOT NULL,
            expires_at bigint NOT NULL,
            revoked_at bigint,
            credential bytea NOT NULL,
            UNIQUE (device_id, issued_at)
        );
        CREATE UNIQUE INDEX registrations_enrolled ON registrations (device_id) WHERE state = \(RegistryEntry.State.enrolled.sql);
        CREATE INDEX registrations_by_user ON registrations (user_id) WHERE state = \(RegistryEntry.State.enrolled.sql);
        CREATE TABLE login_pairs (
            user_name text NOT NULL,
            address text NOT NULL,
            failures bigint NOT NULL,
            blocked_until bigint NOT NULL,
            last_attempt bigint NOT NULL,
            trusted_until bigint NOT NULL,
            PRIMARY KEY (user_name, address)
        );
        CREATE TABLE login_budgets (
            address text PRIMARY KEY,
            credit_ms bigint NOT NULL,
            updated_ms bigint NOT NULL
        )
        """

    /// Room in every page of payloads for new versions of its rows: the updates of a FETCH's
    /// count, an ACK and a sweep change no indexed column, so with room on the page they are
    /// HOT (no new entry in any of the four indexes). Measured on the fetch tallies: 48 ->
    /// 11 us of the server's time per row updated; an ACK 76 -> 58 us. Pages written from
    /// now on keep the room.
    static let version2 = """
        ALTER TABLE payloads SET (fillfactor = 70)
        """

    /// SEND (SPEC.md 4.17). `pushes` is the outbox: each SEND's PUSH in its field encoding,
    /// committed with its payload and gone with it; `state` is `OutboxState`, the counts are
    /// the gateway's answer. `owner` is the store loop that committed or last claimed it and
    /// `lease_until` (unix ms) when another store may claim it: a store that died, or cannot
    /// reach a gateway, leaves its pushes to the others once their lease is over.
    /// `idempotency_keys` keep each SEND's key for 24 hours with a digest of the request.
    static let version3 = """
        CREATE TABLE pushes (
            seq bigint PRIMARY KEY REFERENCES payloads (seq) ON DELETE CASCADE,
            push bytea NOT NULL,
            state integer NOT NULL DEFAULT \(OutboxState.waiting.rawValue),
            written bigint NOT NULL DEFAULT 0,
            queued bigint NOT NULL DEFAULT 0,
            handed_at bigint NOT NULL DEFAULT 0,
            owner text NOT NULL,
            lease_until bigint NOT NULL
        );
        CREATE INDEX pushes_waiting ON pushes (seq) WHERE state = \(OutboxState.waiting.rawValue);
        CREATE TABLE idempotency_keys (
            scope text NOT NULL,
            key text NOT NULL,
            request_hash bytea NOT NULL,
            id bytea NOT NULL,
            payload_expires_at bigint NOT NULL,
            expires_at bigint NOT NULL,
            PRIMARY KEY (scope, key)
        );
        CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at)
        """

    /// Provider API tokens for the store's HTTP provider API (`APIToken`): the hash of each
    /// secret, never the secret; a revoked token keeps its row with `revoked_at` set.
    static let version4 = """
        CREATE TABLE api_tokens (
            id text PRIMARY KEY,
            provider text NOT NULL,
            secret_hash bytea NOT NULL,
            created_at bigint NOT NULL,
            revoked_at bigint,
            scopes text NOT NULL DEFAULT 'send,status,recall'
        )
        """

    /// Refused tokens per client address, in the window of the BAD_TOKEN limit ([8-9]):
    /// counted by every store of the database, so a guesser cannot spread over them.
    static let version5 = """
        CREATE TABLE token_failures (
            address text PRIMARY KEY,
            window_start bigint NOT NULL,
            failures integer NOT NULL
        )
        """

    /// The data keys, shared by every store (`PostgresDataKeys`): each wrapped under a key of
    /// the deployment's `data-keys` file (`wrapped_by`), sealing from `active_at` (unix ms,
    /// the database's clock). The foreign key from `payloads.key_id` is added by the first
    /// import of the file's keys, in its transaction (`PostgresDataKeys.importIfEmpty`): a
    /// migration has no keys, and a store of an earlier build still running meanwhile goes
    /// on sealing under the file's key. `data_key_reseal.key_id`: the key the last finished
    /// re-sealing pass moved rows to.
    static let version6 = """
        CREATE TABLE data_keys (
            id bigint PRIMARY KEY CHECK (id BETWEEN 1 AND 4294967295),
            wrapped bytea NOT NULL,
            wrapped_by bigint NOT NULL,
            added_at bigint NOT NULL,
            active_at bigint NOT NULL
        );
        CREATE TABLE data_key_reseal (
            id integer PRIMARY KEY CHECK (id = 1),
            key_id bigint NOT NULL
        );
        INSERT INTO data_key_reseal (id, key_id) VALUES (1, 0)
        """

    /// Which provider sent each payload (`ProviderIdentity.name`), written by the INSERT that
    /// stores it: only that provider's STATUS and RECALL see it ([4.12-3]). NULL for a payload
    /// stored before senders were recorded, which any provider sees, as it did then. Adding a
    /// nullable column without a default rewrites no row.
    static let version7 = """
        ALTER TABLE payloads ADD COLUMN sender text
        """

    /// Who a payload is for ([4.9-4]): `payloads.audience` is `PayloadAudience.storedKind`
    /// (existing rows: 0, their whole user), and a payload for listed devices has a row in
    /// `audiences` for each, inserted in its transaction and gone with it. (Version 7 is the
    /// payloads' `sender`.)
    static let version8 = """
        ALTER TABLE payloads ADD COLUMN IF NOT EXISTS audience integer NOT NULL DEFAULT 0;
        CREATE TABLE audiences (
            seq bigint NOT NULL REFERENCES payloads (seq) ON DELETE CASCADE,
            device text NOT NULL,
            PRIMARY KEY (seq, device)
        )
        """

    /// A SEND is one row ([4.17-1], [4.17-5]): its push intent and its idempotency key become
    /// columns of its payload, the rows of `pushes` and `idempotency_keys` move there (a key
    /// whose payload is gone goes with it) and the two tables are dropped. `outbox` is
    /// `OutboxState` (NULL for a STORE), `outbox_owner` and `lease_until` what `owner` and
    /// `lease_until` were; the key's id and the expiry it answers with are the row's own.
    /// Partial indexes hold the waiting pushes in sequence order and the keys by (scope,
    /// key), one row per key: a later SEND frees a key whose expiry has passed.
    static let version9 = """
        ALTER TABLE payloads ADD COLUMN push bytea, ADD COLUMN outbox integer,
            ADD COLUMN written bigint NOT NULL DEFAULT 0, ADD COLUMN queued bigint NOT NULL DEFAULT 0,
            ADD COLUMN handed_at bigint NOT NULL DEFAULT 0, ADD COLUMN outbox_owner text, ADD COLUMN lease_until bigint,
            ADD COLUMN key_scope text, ADD COLUMN idem_key text, ADD COLUMN request_hash bytea, ADD COLUMN key_expires_at bigint;
        UPDATE payloads p SET push = o.push, outbox = o.state, written = o.written, queued = o.queued, handed_at = o.handed_at,
                              outbox_owner = o.owner, lease_until = o.lease_until
        FROM pushes o WHERE o.seq = p.seq;
        UPDATE payloads p SET key_scope = k.scope, idem_key = k.key, request_hash = k.request_hash, key_expires_at = k.expires_at
        FROM idempotency_keys k WHERE k.id = p.id;
        DROP TABLE pushes;
        DROP TABLE idempotency_keys;
        CREATE INDEX payloads_waiting ON payloads (seq) WHERE outbox = \(OutboxState.waiting.rawValue);
        CREATE UNIQUE INDEX payloads_by_key ON payloads (key_scope, idem_key) WHERE idem_key IS NOT NULL
        """

    /// Sealed payloads (SPEC.md 4.6-5, 4.18, 4.19): each registration's device key (its suite,
    /// its bytes and its id, NULL without a key: none has one until its device logs in with
    /// one), each payload whether it is sealed (every row before: plain), and a user's
    /// registry entries by change number whatever their state, for the key cursor
    /// ([4.18-3]). A sealed id is unique as every id is (`payloads_id_key`): its sender
    /// derived it, and one already stored is CONFLICT ([4.19-2]).
    static let version10 = """
        ALTER TABLE registrations ADD COLUMN key_suite integer, ADD COLUMN device_key bytea, ADD COLUMN key_id bigint;
        ALTER TABLE payloads ADD COLUMN sealed boolean NOT NULL DEFAULT false;
        CREATE INDEX registrations_user_changes ON registrations (user_id, change_seq)
        """

    /// The version the database is at: 0 before the first migration.
    public static func version(on connection: PostgresBlockingConnection) throws(PostgresError) -> Int64 {
        let table = try connection.query("SELECT to_regclass('schema_version') IS NOT NULL")
        guard try table.bool(0, 0) else { return 0 }
        let found = try connection.query("SELECT coalesce(max(version), 0)::bigint FROM schema_version")
        return try found.int64(0, 0)
    }

    /// Brings the database up to `currentVersion`, or throws `.newer` if a later build
    /// migrated it. Costs one query when it is current already.
    public static func prepare(_ connection: PostgresBlockingConnection) throws(PostgresSchemaError) {
        do {
            let found = try version(on: connection)
            if found == currentVersion { return }
            if found > currentVersion { throw PostgresSchemaError.newer(found: found, known: currentVersion) }
            try connection.transaction {
                _ = try connection.query("SELECT 1 FROM pg_advisory_xact_lock($1)", [.int64(migrationLock)])
                _ = try connection.query("""
                    CREATE TABLE IF NOT EXISTS schema_version (
                        version bigint PRIMARY KEY,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                // Asked again under the lock: another process may have migrated meanwhile.
                let now = try connection.query("SELECT coalesce(max(version), 0)::bigint FROM schema_version").int64(0, 0)
                if now > currentVersion { throw PostgresSchemaError.newer(found: now, known: currentVersion) }
                for migration in migrations where migration.version > now {
                    try connection.execute(migration.sql)
                    _ = try connection.query("INSERT INTO schema_version (version) VALUES ($1)", [.int64(migration.version)])
                }
            }
        } catch let error as PostgresSchemaError {
            throw error
        } catch let error as PostgresError {
            throw .database(error)
        } catch {
            throw .database(PostgresError(kind: .protocolViolation, message: "\(error)"))
        }
    }
}
