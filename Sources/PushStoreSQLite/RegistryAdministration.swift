import PushSecurity
import PushSession
import PushStoreLogic
import PushWire

/// The device commands' side of the registry (`securepush device enroll`, `list`,
/// `revoke`), run in their own process next to a store that may be running: each change is
/// one transaction, and the running store sees it through the registry's change counter
/// (checked with `PRAGMA data_version`, see `SQLitePayloadReader.registrySequence`).
public final class RegistryAdministration: RegistryAdministering {
    private let connection: SQLiteConnection

    public init(databasePath: String) throws(SQLiteError) {
        connection = try SQLitePayloadDatabase.open(path: databasePath)
    }

    /// Enrolls many devices in one transaction (one sync to disk for all: a load test's
    /// thousand devices), each as `enroll` would; all or none.
    public func enrollAll(_ requests: [EnrolmentRequest], lifetimeMs: UInt64, nowMs: UInt64, signer: CredentialSigner,
                          deliver: (EnrolmentRequest, [UInt8]) throws -> Void) throws(EnrolmentError) -> [Enrolment] {
        try RegistrationMinting.enrollAll(requests, lifetimeMs: lifetimeMs, nowMs: nowMs, signer: signer, deliver: deliver,
                                          in: SQLiteRegistrationLedger(connection: connection))
    }

    /// Revokes the enrolled registrations of every id in `deviceIDs` in one transaction:
    /// what they were.
    public func revoke(deviceIDs: [String], nowMs: UInt64) throws -> [RegistrationRecord] {
        try UserTable.transaction(connection) { () throws(SQLiteError) -> [RegistrationRecord] in
            var revoked: [RegistrationRecord] = []
            for device in deviceIDs {
                if let record = try RegistryTable.revoke(device, nowMs: nowMs, on: connection) { revoked.append(record) }
            }
            return revoked
        }
    }

    /// Every registration kept (enrolled, and revoked ones not pruned yet), of one user's
    /// name or of all, by device id then issue time.
    public func list(user: String? = nil) throws -> [RegistrationRecord] {
        let filter = user == nil ? "" : "WHERE user_name = ?"
        let statement = try connection.prepare("SELECT \(RegistryRow.columns) FROM registrations \(filter) ORDER BY device_id, issued_at",
                                               persistent: false)
        try statement.bind(user.map { [.text($0)] } ?? [])
        var records: [RegistrationRecord] = []
        while try statement.step() { records.append(RegistryTable.record(statement)) }
        return records
    }

    /// The enrolled registration of `deviceID`, if any.
    public func enrolled(deviceID: String) throws -> RegistrationRecord? {
        try RegistryTable.enrolled(deviceID, on: connection)
    }

    /// The number of the last change to the registry (0 before the first).
    public func lastChange() throws -> UInt64 {
        try RegistryTable.lastChange(on: connection)
    }
}

/// Enrolments as the SQLite database records them, in one write transaction.
private struct SQLiteRegistrationLedger: RegistrationLedger {
    let connection: SQLiteConnection

    func inTransaction<T>(_ body: () throws -> T) throws -> T {
        try UserTable.transaction(connection, body, failure: { $0 })
    }

    func userID(named name: String) throws -> UInt64? {
        try connection.integer(bound: "SELECT id FROM users WHERE name = ?", [.text(name)]).map { UInt64(bitPattern: $0) }
    }

    func latestIssue(of deviceID: String) throws -> UInt64? { try RegistryTable.latestIssue(of: deviceID, on: connection) }

    func revoke(_ deviceID: String, nowMs: UInt64) throws -> RegistrationRecord? {
        try RegistryTable.revoke(deviceID, nowMs: nowMs, on: connection)
    }

    func insert(_ registration: Registration, userID: UInt64, credential: [UInt8]) throws -> RegistrationRecord {
        try RegistryTable.insert(registration, userID: userID, credential: credential, on: connection)
    }

    func storageFailure(_ error: any Error) -> any Error & Sendable {
        if let error = error as? SQLiteError { return error }
        return StoreBackendError(error)
    }
}
