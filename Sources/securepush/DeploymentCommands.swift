#if canImport(Glibc)
import Glibc
#endif
import ArgumentParser
import PushClock
import PushSecurity
import PushSession
import PushStore
import PushStoreLogic
import PushStorePostgres

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a deployment directory: server key, provider key and config, readable by their owner only.")

    @Argument(help: "The deployment directory to create.")
    var directory: String
    @Option(help: ArgumentHelp("""
        Keep the store's data in this PostgreSQL database (store.database in the config), which any number of \
        stores can share; its tables are created now (default: a SQLite file in the directory). \(ConfigSchema.databaseURLNote)
        """, valueName: "postgresql://..."))
    var database: String?

    func run() throws {
        if let database, let problem = ConfigSchema.databaseURLProblem(database) { throw CommandFailure("--database: \(problem)") }
        let before = InitCommand.entries(of: directory)
        do {
            let deployment = try Deployment.create(at: directory, settings: database.map { [("store.database", $0)] } ?? [])
            if database != nil {
                let store = StoreDatabase(deployment)
                do {
                    _ = try store.users()
                    // The file's keys go into the database now: every file a store host
                    // needs exists, and a copy of the directory made from here on serves.
                    _ = try store.dataKeys(directory: deployment.directory)
                } catch PostgresDataKeyError.keys(let error) where error.isAnotherDeploymentsFile {
                    InitCommand.remove(entriesNotIn: before, of: directory)
                    throw CommandFailure("cannot set up \(store): it holds the data keys of another deployment (\(error)); nothing was "
                                         + "created in \(directory): to add a store host to that deployment, copy its directory "
                                         + "here instead of running init; for a new deployment, give init a database of its own")
                } catch {
                    // Nothing half-made stays behind: the same init can simply be run again.
                    InitCommand.remove(entriesNotIn: before, of: directory)
                    throw CommandFailure("cannot set up \(store): \(error); nothing was created in \(directory): "
                                         + "fix the database or the URL and run init again")
                }
                announce("created deployment in \(deployment.directory), its store data in \(store)")
            } else {
                announce("created deployment in \(deployment.directory)")
            }
        } catch let failure as Deployment.Failure {
            throw CommandFailure(failure.description)
        }
    }

    /// The names in `directory`, or nil when there is no such directory.
    static func entries(of directory: String) -> Set<String>? {
        guard let stream = opendir(directory) else { return nil }
        defer { closedir(stream) }
        var names: Set<String> = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.insert(name) }
        }
        return names
    }

    /// Removes the files this run made in `directory` (those not in `before`), and the
    /// directory itself when the run made it.
    static func remove(entriesNotIn before: Set<String>?, of directory: String) {
        for name in (entries(of: directory) ?? []).subtracting(before ?? []) { unlink(directory + "/" + name) }
        if before == nil { rmdir(directory) }
    }
}

struct UserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Add, remove or list the users the store knows.",
        discussion: """
        Each user has an internal identity that its payloads and tokens are bound to. Removing a user \
        deletes its payloads and revokes its devices and fetch tokens at once, also in a running store; a name \
        added again is a new user that sees none of the old data.
        """,
        subcommands: [Add.self, Remove.self, List.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a user; the password is read from stdin or a prompt.")
        @Argument(help: "User name: 1 to 64 bytes of UTF-8 without control characters, compared as exact bytes (no Unicode normalization).")
        var name: String
        @Option(help: "The deployment directory.") var dataDir: String

        func validate() throws { try validateUserName(name) }

        func run() throws {
            let deployment = try openDeployment(dataDir)
            let password = try readPassword(prompt: "password for \(name): ")
            let iterations = deployment.integer("password.iterations") ?? PasswordHash.defaultIterations
            let hash = try PasswordHash.make(password: password, iterations: max(1, iterations))
            let users = try openUsers(deployment)
            guard try users.add(name, passwordHash: hash.encoded, nowMs: Clocks.wallMilliseconds()) != nil else {
                throw CommandFailure("user \(name) already exists")
            }
            announce("added user \(name)")
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a user: its payloads are deleted, its devices revoked and its fetch tokens refused from now on, also by a running store.")
        @Argument(help: "User name.") var name: String
        @Option(help: "The deployment directory.") var dataDir: String

        func run() throws {
            let users = try openUsers(try openDeployment(dataDir))
            guard let removed = try users.remove(name, clock: Clocks.wallMilliseconds) else {
                throw CommandFailure("no user \(name)")
            }
            let devices = removed.registrations == 1 ? "1 device" : "\(removed.registrations) devices"
            announce("removed user \(name): \(removed.payloads) payload\(removed.payloads == 1 ? "" : "s") deleted, \(devices) revoked, its fetch tokens revoked")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the users: name, when it was added (local time, ISO 8601) and its payloads still readable.")
        @Option(help: "The deployment directory.") var dataDir: String

        func run() throws {
            let users = try openUsers(try openDeployment(dataDir))
            let rows = try users.list(nowMs: Clocks.wallMilliseconds())
            let width = max(4, rows.map(\.name.count).max() ?? 0)
            print("NAME".padded(to: width) + "  CREATED                    PAYLOADS")
            for user in rows {
                print(user.name.padded(to: width) + "  " + localISO8601(milliseconds: user.createdAt).padded(to: 25) + "  \(user.livePayloads)")
            }
            fflush(nil)
        }
    }
}

/// `2025-01-31T14:05:09+01:00`: the local time of a unix-ms instant, with its UTC offset.
func localISO8601(milliseconds: UInt64) -> String {
    var seconds = time_t(milliseconds / 1000)
    var parts = tm()
    guard localtime_r(&seconds, &parts) != nil else { return "\(milliseconds)" }
    func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
    let offset = parts.tm_gmtoff
    let sign = offset < 0 ? "-" : "+"
    let minutes = abs(offset) / 60
    return "\(parts.tm_year + 1900)-\(two(Int(parts.tm_mon) + 1))-\(two(Int(parts.tm_mday)))"
        + "T\(two(Int(parts.tm_hour))):\(two(Int(parts.tm_min))):\(two(Int(parts.tm_sec)))"
        + "\(sign)\(two(minutes / 60)):\(two(minutes % 60))"
}

extension String {
    /// Left-aligned in a column of `width` characters.
    func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}

/// The users in the deployment's store database, SQLite or PostgreSQL (created with its
/// tables if the store never ran).
func openUsers(_ deployment: Deployment) throws -> UserAdministering {
    let database = StoreDatabase(deployment)
    do {
        return try database.users()
    } catch {
        throw CommandFailure("cannot open the store database \(database): \(error)")
    }
}

func validateUserName(_ name: String) throws {
    try checkIdentifier(name, as: .user, "the user name")
}

func openDeployment(_ directory: String) throws -> Deployment {
    do {
        return try Deployment.open(directory)
    } catch let failure as Deployment.Failure {
        throw CommandFailure(failure.description)
    }
}
