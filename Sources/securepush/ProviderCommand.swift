#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import PushClock
import PushStore
import PushStoreLogic

struct ProviderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "provider",
        abstract: "Manage what providers authenticate with to the store's HTTP provider API.",
        subcommands: [Token.self])

    struct Token: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create, list or revoke provider API tokens (Authorization: Bearer sp_<id>_<secret>).",
            discussion: """
            The store keeps only a hash of each token's secret: the token is shown once, when it is created. \
            A revoked token is refused from the store's next request on, and stays listed. \
            A token's status (GET) and recall (DELETE) reach only the messages its own provider sent; another \
            provider's message is answered 404, exactly as an id that does not exist. The provider named \
            provider-key is the one that holds the deployment's provider key (securepush send, status and recall), \
            so a token made for that name sees what they sent. The scope any-provider widens status and recall to \
            every provider's messages, for an operator's tool.
            """,
            subcommands: [Create.self, List.self, Revoke.self])

        struct Create: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create a token for a provider and print it (alone, on stdout): it is shown this once.")
            @Argument(help: "The provider's name (1 to 64 characters: letters, digits, '-', '_', '.').") var name: String
            @Option(help: "The deployment directory.") var dataDir: String
            @Option(help: ArgumentHelp("What the token may do, comma-separated: send (POST /v1/messages), status (GET) and recall (DELETE) of its provider's own messages (default: these three); add any-provider to let status and recall reach every provider's messages.",
                                       valueName: "scopes"))
            var scope: String?

            func run() throws {
                guard APIToken.isValidProviderName(name) else { throw CommandFailure("\(APITokenError.invalidProviderName(name))") }
                let scopes = try scope.map { text in
                    guard let scopes = APITokenScopes(names: text) else {
                        throw CommandFailure("--scope: '\(text)' is not a comma-separated list of send, status, recall and any-provider")
                    }
                    return scopes
                } ?? .all
                let tokens = try openAPITokens(dataDir)
                let created = try administer { () throws(APITokenError) in
                    try tokens.create(provider: name, scopes: scopes, nowMs: Clocks.wallMilliseconds())
                }
                announce(created.text)
                writeStandardError("created API token \(created.record.id) for provider \(name); it is shown only this once, store it now\n")
            }
        }

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "List the tokens: id, provider, when created (UTC, ISO 8601) and whether active or revoked (never the secrets).")
            @Option(help: "The deployment directory.") var dataDir: String

            func run() throws {
                let tokens = try openAPITokens(dataDir)
                let records = try administer { () throws(APITokenError) in try tokens.list() }
                let width = max(8, records.map(\.provider.count).max() ?? 0)
                print("ID            " + "PROVIDER".padded(to: width) + "  CREATED               SCOPES              STATE")
                for record in records {
                    let state = record.revokedAt.map { "revoked at \(utcISO8601(milliseconds: $0))" } ?? "active"
                    print(record.id.padded(to: 12) + "  " + record.provider.padded(to: width) + "  "
                          + utcISO8601(milliseconds: record.createdAt).padded(to: 20) + "  " + record.scopes.description.padded(to: 18) + "  " + state)
                }
                fflush(nil)
            }
        }

        struct Revoke: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Revoke a token by its id: the store refuses it from its next request on.")
            @Argument(help: "The token's id (the 12 hex digits after sp_; see `securepush provider token list`).") var id: String
            @Option(help: "The deployment directory.") var dataDir: String

            func run() throws {
                let tokens = try openAPITokens(dataDir)
                let revocation = try administer { () throws(APITokenError) in try tokens.revoke(id: id, nowMs: Clocks.wallMilliseconds()) }
                switch revocation {
                case .revoked(let record):
                    announce("revoked API token \(record.id) of provider \(record.provider)")
                case .alreadyRevoked(let record):
                    let when = record.revokedAt.map { " at \(utcISO8601(milliseconds: $0))" } ?? ""
                    announce("API token \(record.id) of provider \(record.provider) was already revoked\(when)")
                }
            }
        }
    }
}

/// The API tokens in a deployment's store database, SQLite or PostgreSQL (created if the
/// store never ran).
func openAPITokens(_ dataDir: String) throws -> APITokenAdministering {
    let database = StoreDatabase(try openDeployment(dataDir))
    do {
        return try database.apiTokens()
    } catch {
        throw CommandFailure("cannot open the store database \(database): \(error)")
    }
}

private func administer<T>(_ body: () throws(APITokenError) -> T) throws(CommandFailure) -> T {
    do {
        return try body()
    } catch {
        throw CommandFailure("\(error)")
    }
}

/// `2025-01-31T13:05:09Z`: a unix-ms instant in UTC.
func utcISO8601(milliseconds: UInt64) -> String { UTCTime.iso8601(milliseconds: milliseconds) }
