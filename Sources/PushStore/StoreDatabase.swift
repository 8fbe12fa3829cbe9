import PushPostgres
import PushSecurity
import PushStoreLogic
import PushStorePostgres
import PushStoreSQLite

/// Where a deployment's store keeps its data: the PostgreSQL database its config names
/// (`store.database`), or the SQLite file in its directory. The deployment commands open
/// the users and the registry through it, so they work on whichever the store uses.
public enum StoreDatabase: Sendable, Equatable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(url: String)

    /// The database of `deployment`.
    public init(_ deployment: Deployment) {
        if let url = deployment.value("database", for: .store) {
            self = .postgres(url: url)
        } else {
            self = .sqlite(path: StoreFiles.databasePath(deployment.directory))
        }
    }

    /// For messages: the file, or the URL without its password.
    public var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let url): PostgresURL.redacted(url)
        }
    }

    /// The users, created with the schema if the database is new.
    public func users() throws -> UserAdministering {
        switch self {
        case .sqlite(let path): try UserAdministration(databasePath: path)
        case .postgres(let url): try PostgresAdministration(url: url)
        }
    }

    /// The provider API tokens, created with the schema if the database is new.
    public func apiTokens() throws -> APITokenAdministering {
        switch self {
        case .sqlite(let path): try APITokenAdministration(databasePath: path)
        case .postgres(let url): try PostgresAdministration(url: url).apiTokens
        }
    }

    /// The data keys that seal payloads, as `securepush key` manages them: the data-keys file
    /// in `directory` (SQLite), or the database's keys opened with that file (PostgreSQL; the
    /// file's keys are imported into a database that has none yet).
    public func dataKeys(directory: String) throws -> DataKeyAdministering {
        switch self {
        case .sqlite(let path): try DataKeyAdministration(databasePath: path)
        case .postgres(let url): try PostgresDataKeyAdministration(url: url, dataKeysPath: DataKeyFile.path(inDirectory: directory))
        }
    }

    /// The device registry, created with the schema if the database is new.
    public func registry() throws -> RegistryAdministering {
        switch self {
        case .sqlite(let path): try RegistryAdministration(databasePath: path)
        case .postgres(let url): try PostgresAdministration(url: url)
        }
    }
}
