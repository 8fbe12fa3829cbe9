import ArgumentParser
import PushSecurity
import PushStore
import PushSession

struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a deployment directory: server key, provider key and config, readable by their owner only.")

    @Argument(help: "The deployment directory to create.")
    var directory: String

    func run() throws {
        do {
            let deployment = try Deployment.create(at: directory)
            announce("created deployment in \(deployment.directory)")
        } catch let failure as Deployment.Failure {
            throw CommandFailure(failure.description)
        }
    }
}

struct UserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Add or remove the users the store knows.",
        subcommands: [Add.self, Remove.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a user; the password is read from stdin or a prompt.")
        @Argument(help: "User name (1 to 64 bytes).") var name: String
        @Option(help: "The deployment directory.") var dataDir: String

        func run() throws {
            try validateUserName(name)
            let deployment = try openDeployment(dataDir)
            let password = try readPassword(prompt: "password for \(name): ")
            let iterations = deployment.integer("password.iterations") ?? PasswordHash.defaultIterations
            let hash = try PasswordHash.make(password: password, iterations: max(1, iterations))
            let writer = try SQLitePayloadWriter(path: StoreFiles.databasePath(dataDir))
            guard try writer.addUser(name, passwordHash: hash.encoded, nowMs: Clocks.wallMilliseconds()) else {
                throw CommandFailure("user \(name) already exists")
            }
            announce("added user \(name)")
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a user.")
        @Argument(help: "User name.") var name: String
        @Option(help: "The deployment directory.") var dataDir: String

        func run() throws {
            _ = try openDeployment(dataDir)
            let writer = try SQLitePayloadWriter(path: StoreFiles.databasePath(dataDir))
            guard try writer.removeUser(name) else { throw CommandFailure("no user \(name)") }
            announce("removed user \(name)")
        }
    }
}

func validateUserName(_ name: String) throws {
    guard !name.isEmpty, name.utf8.count <= 64 else { throw CommandFailure("a user name is 1 to 64 bytes") }
}

func openDeployment(_ directory: String) throws -> Deployment {
    do {
        return try Deployment.open(directory)
    } catch let failure as Deployment.Failure {
        throw CommandFailure(failure.description)
    }
}
