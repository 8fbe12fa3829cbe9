import ArgumentParser
import PushSecurity
import PushStore

struct KeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Manage the data keys that encrypt payloads at rest (the deployment's data-keys file).",
        discussion: """
        Payloads are stored sealed with AES-256-GCM under the newest data key. `key rotate` adds a \\
        key for new writes; a running store notices it within a second and re-seals older payloads \\
        in the background, in small batches between writes (a stopped one does so when it next \\
        starts). `key prune` removes the keys no payload uses any more.
        """,
        subcommands: [Rotate.self, Status.self, Prune.self])

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a data key; new payloads are sealed under it.")
        @Option(help: "The deployment directory.") var dataDir: String

        func run() throws {
            let keys = try openKeys(dataDir)
            let id: UInt32
            do {
                id = try keys.rotate()
            } catch {
                throw CommandFailure("\(error)")
            }
            let older = try keys.usage().filter { $0.keyID != id }.reduce(0) { $0 + $1.rows }
            announce("added data key \(id); \(older) payload\(older == 1 ? "" : "s") still under older keys (a running store re-seals them in the background)")
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the data keys and how many payloads each one seals.")
        @Option(help: "The deployment directory.") var dataDir: String

        func run() throws {
            for key in try openKeys(dataDir).usage() {
                let name = key.keyID == 0 ? "clear" : "\(key.keyID)"
                let notes = [key.isCurrent ? "current" : nil, key.keyID == 0 ? "stored in clear by an earlier build" : nil,
                             key.inFile || key.keyID == 0 ? nil : "MISSING from the data-keys file"].compactMap { $0 }
                announce("key \(name): \(key.rows) payload\(key.rows == 1 ? "" : "s")" + (notes.isEmpty ? "" : " (\(notes.joined(separator: ", ")))"))
            }
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove the data keys, other than the newest, that no payload uses.")
        @Option(help: "The deployment directory.") var dataDir: String
        @Flag(help: "First re-seal every payload under the newest key here, instead of waiting for a running store to.")
        var reseal = false

        func run() throws {
            let keys = try openKeys(dataDir)
            if reseal {
                let unreadable = try keys.resealAll()
                if unreadable > 0 { announce("\(unreadable) payload\(unreadable == 1 ? "" : "s") could not be opened and keep their key") }
            }
            let removed = try keys.prune()
            let left = try keys.usage().filter { !$0.isCurrent && $0.rows > 0 }
            announce(removed.isEmpty ? "no data key removed" : "removed data key\(removed.count == 1 ? "" : "s") \(removed.map(String.init).joined(separator: ", "))")
            for key in left where key.keyID != 0 {
                announce("data key \(key.keyID) still seals \(key.rows) payload\(key.rows == 1 ? "" : "s")")
            }
        }
    }
}

private func openKeys(_ dataDir: String) throws -> DataKeyAdministration {
    let deployment = try openDeployment(dataDir)
    if case .postgres = StoreDatabase(deployment) {
        // Every store host holds its own copy of data-keys: a key added on one is unknown
        // to the others until copied, so rotation there is a procedure, not one command.
        throw CommandFailure("""
            the key commands work on a SQLite store only; with store.database set, the data keys in \(dataDir)/data-keys \
            are shared by copying the file to every store host
            """)
    }
    do {
        return try DataKeyAdministration(databasePath: StoreFiles.databasePath(dataDir))
    } catch {
        throw CommandFailure("\(error)")
    }
}
