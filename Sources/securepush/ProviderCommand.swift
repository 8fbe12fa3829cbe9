#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import PushClock
import PushStore
import PushClient
import PushStoreLogic
import PushWire

struct ProviderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "provider",
        abstract: "Manage what providers authenticate with to the store's HTTP provider API, read a user's device keys, and run provider commands from stdin.",
        subcommands: [Token.self, Keys.self, Session.self])

    struct Keys: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the device keys of a user that a sealed payload is sealed to (KEYS): device, suite and key id, one a line.",
            discussion: """
            Read from the store as `send --seal` reads them. The key id names one key of one device: a device that \
            logs in with --new-key gets another. On stderr, the number of keys and the user's key cursor, which \
            changes whenever one of her devices is enrolled, revoked or re-keyed.
            """)

        @OptionGroup var provider: ProviderOptions
        @Argument(help: "The user whose device keys are listed.") var user: String

        func validate() throws { try checkIdentifier(user, as: .user, "the user name") }

        func run() throws {
            let keys: KeysOK = try provider.askStore({ client, done in client.keys(for: user, completion: done) }) { error, client in
                switch error {
                case .status(.unknownUser, _): CommandFailure("the store has no user \(user)")
                case .storeCannotSeal: CommandFailure("the store at \(client.storeAddress) does not know KEYS (a store before protocol revision 1.5)")
                default: nil
                }
            }
            let width = max(6, keys.keys.map { $0.deviceID.count }.max() ?? 0)
            print("DEVICE".padded(to: width) + "  SUITE   KEY ID")
            for entry in keys.keys {
                print(entry.deviceID.padded(to: width) + "  " + entry.key.suite.description.padded(to: 6) + "  " + entry.keyID.description)
            }
            fflush(nil)
            writeStandardError("\(keys.keys.count) device key\(keys.keys.count == 1 ? "" : "s") of \(user), key cursor \(keys.cursor)\n")
        }
    }

    struct Token: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create, list or revoke provider API tokens (Authorization: Bearer sp_<id>_<secret>).",
            discussion: """
            The store keeps only a hash of each token's secret: the token is shown once, when it is created. \
            A revoked token is refused from the store's next request on, and stays listed. \
            A token's status (GET) and recall (DELETE) reach only the messages its own provider sent; another \
            provider's message is answered 404, exactly as an id that does not exist. The provider named \
            provider-key is the one that holds the deployment's provider key (securepush send, status and recall), \
            so a token made for that name sees what they sent. The scope keys reads any recipient's device keys \
            (GET /v1/recipients/NAME/keys), to seal to; tokens made before it existed keep the scopes they had. \
            The scope any-provider widens status and recall to every provider's messages, for an operator's tool.
            """,
            subcommands: [Create.self, List.self, Revoke.self])

        struct Create: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Create a token for a provider and print it (alone, on stdout): it is shown this once.")
            @Argument(help: "The provider's name (1 to 64 characters: letters, digits, '-', '_', '.').") var name: String
            @Option(help: "The deployment directory.") var dataDir: String
            @Option(help: ArgumentHelp("What the token may do, comma-separated: send (POST /v1/messages), status (GET) and recall (DELETE) of its provider's own messages, and keys (GET /v1/recipients/NAME/keys, a recipient's device keys) (default: these four); add any-provider to let status and recall reach every provider's messages.",
                                       valueName: "scopes"))
            var scope: String?

            func run() throws {
                guard APIToken.isValidProviderName(name) else { throw CommandFailure("\(APITokenError.invalidProviderName(name))") }
                let scopes = try scope.map { text in
                    guard let scopes = APITokenScopes(names: text) else {
                        throw CommandFailure("--scope: '\(text)' is not a comma-separated list of send, status, recall, keys and any-provider")
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
                print("ID            " + "PROVIDER".padded(to: width) + "  CREATED               SCOPES                   STATE")
                for record in records {
                    let state = record.revokedAt.map { "revoked at \(utcISO8601(milliseconds: $0))" } ?? "active"
                    print(record.id.padded(to: 12) + "  " + record.provider.padded(to: width) + "  "
                          + utcISO8601(milliseconds: record.createdAt).padded(to: 20) + "  " + record.scopes.description.padded(to: 23) + "  " + state)
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
